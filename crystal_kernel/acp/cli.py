"""``crystal acp [--workspace DIR] [model flags] [process flags]``: serve Crystal as an
Agent Client Protocol agent on stdin/stdout until the client closes stdin.

The JSON-RPC stream owns the process's original stdin and stdout. File descriptor 0 is
pointed at /dev/null and 1 at stderr, so a stray print or a child process that inherits
them can never corrupt the protocol. SIGTERM, SIGINT and SIGHUP end the agent the same
way as end of input: turns are cancelled and every session is closed (its background
jobs and tool processes die with it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from crystal_kernel.errors import UserError

# Big enough for an image in a prompt (the SDK's own default).
STREAM_LIMIT = 50 * 1024 * 1024


def add_subparsers(sub: Any) -> None:
    from crystal_kernel.host.bootstrap import add_model_flags, add_process_flags

    acp = sub.add_parser("acp", help="serve Crystal as an Agent Client Protocol agent on stdin/stdout")
    acp.add_argument("--workspace", metavar="DIR",
                     help="use this folder for every session instead of the client's working directory")
    add_model_flags(acp)
    add_process_flags(acp)
    acp.set_defaults(handler=cmd_acp)


def options_from_args(ns: argparse.Namespace) -> Any:
    """Check every flag before serving; a bad one is a UserError (exit 2)."""
    from crystal_kernel.acp.agent import AgentOptions
    from crystal_kernel.host.bootstrap import flags_from_args, overrides_from_args
    from crystal_kernel.host.config import load_config
    from crystal_kernel.tools.catalog import check_disabled

    flags = flags_from_args(ns)
    flags.disable_tool = check_disabled(flags.disable_tool)
    overrides = overrides_from_args(ns)
    load_config(overrides=overrides)  # refuses a bad mode, approval or config value now
    workspace = None
    if ns.workspace:
        workspace = Path(ns.workspace).expanduser()
        if not workspace.is_dir():
            raise UserError(f"The workspace '{ns.workspace}' is not a folder.")
        workspace = workspace.resolve()
    return AgentOptions(workspace=workspace, overrides=overrides, flags=flags)


def cmd_acp(ns: argparse.Namespace) -> int:
    options = options_from_args(ns)
    if sys.stdin.isatty():
        raise UserError("crystal acp speaks JSON-RPC on stdin/stdout; start it from an ACP client "
                        "(Jupyter AI, Zed, ...), not a terminal.")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="crystal acp: %(message)s")
    in_fd, out_fd = _claim_stdio()
    asyncio.run(serve(options, in_fd, out_fd))
    return 0


def _claim_stdio() -> tuple[int, int]:
    """Keep private copies of stdin/stdout for the protocol; fd 0 becomes /dev/null and
    fd 1 a copy of stderr."""
    sys.stdout.flush()
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return in_fd, out_fd


async def _streams(in_fd: int, out_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve(options: Any, in_fd: int, out_fd: int) -> None:
    """Run the agent until end of input or a signal, then close every session."""
    from acp import run_agent

    from crystal_kernel.acp.agent import CrystalAgent

    agent = CrystalAgent(options)
    reader, writer = await _streams(in_fd, out_fd)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, main.cancel)
    try:
        # Unstable protocol parts used: elicitation (questions), session/close and resume.
        await run_agent(agent, writer, reader, use_unstable_protocol=True)
    except asyncio.CancelledError:
        main.uncancel()  # a signal: shut down normally below
    finally:
        await agent.close_all()
