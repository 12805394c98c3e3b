"""``crystal acp [--workspace DIR] [--session ID | --resume ID] [model flags] [process flags]``: serve Crystal as an
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
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import log_to_terminal

if TYPE_CHECKING:
    from crystal_kernel.acp.stdio import BadLine

# Big enough for an image in a prompt (the SDK's own default).
STREAM_LIMIT = 50 * 1024 * 1024
# After the end of input, how long the requests already read may take to answer.
DRAIN_SECONDS = 10.0


def add_subparsers(sub: Any) -> None:
    from crystal_kernel.host.flags import add_model_flags, add_process_flags, add_reasoning_flag, add_session_flags

    acp = sub.add_parser(
        "acp", help="serve Crystal as an Agent Client Protocol agent on stdin/stdout",
        description="Serve Crystal as an Agent Client Protocol (ACP) agent: an ACP client (an editor, "
                    "Jupyter AI) starts this command and speaks JSON-RPC with it on stdin and stdout until "
                    "it closes stdin. Each client session is a Crystal session in the client's working "
                    "directory (or --workspace); the flags apply to every session (docs/acp.md).")
    acp.add_argument("--workspace", metavar="DIR",
                     help="use this folder for every session instead of the client's working directory")
    # Taken and checked like every front's (FL-6), then refused: see refuse_session_flags.
    add_session_flags(acp, resume_help="not taken here: the ACP client continues a saved session with "
                                       "session/load (docs/acp.md)")
    for action in acp._actions:
        if action.dest == "session":
            action.help = "not taken here: the ACP client opens its sessions with session/new (docs/acp.md)"
    add_model_flags(acp)
    add_reasoning_flag(acp)
    add_process_flags(acp)
    acp.set_defaults(handler=cmd_acp)


def options_from_args(ns: argparse.Namespace) -> Any:
    """Check every flag before serving; a bad one is a UserError (exit 2)."""
    from crystal_kernel.acp.agent import AgentOptions
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.flags import flags_from_args, overrides_from_args
    from crystal_kernel.tools.catalog import check_disabled

    refuse_session_flags(ns)
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


def refuse_session_flags(ns: argparse.Namespace) -> None:
    """``--session ID`` and ``--resume ID`` (FL-6: every front takes them, and the shared
    check has refused a malformed id already) are refused with one line: one agent
    process serves every session its client opens, and the client picks which, with
    ``session/new`` or ``session/load`` (as ``/resume`` is refused over ACP). A flag that
    silently pinned one of them would surprise the client, which records the ids it made."""
    for flag in ("session", "resume"):
        value = getattr(ns, flag, None)
        if value is not None:
            raise UserError(f"crystal acp takes no --{flag}: one agent serves every session its ACP client opens, "
                            f"and the client continues '{value}' with session/load (sessionId '{value}').")


def cmd_acp(ns: argparse.Namespace) -> int:
    from crystal_kernel.core.gc_pause import end_front_start

    options = options_from_args(ns)  # imports the agent, the ACP SDK and the host
    end_front_start()  # main() paused the collector for those imports
    if sys.stdin.isatty():
        raise UserError("crystal acp speaks JSON-RPC on stdin/stdout; start it from an ACP client "
                        "(Jupyter AI, Zed, ...), not a terminal.")
    # stderr is a terminal or a client's log view; a record may quote an MCP server's or
    # the client's text, so its control characters are made visible (TRUST-6).
    log_to_terminal("crystal acp: %(message)s", force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_answered_errors)
    in_fd, out_fd = _claim_stdio()
    asyncio.run(serve(options, in_fd, out_fd))
    return 0


def _answered_errors(record: logging.LogRecord) -> bool:
    """Leave out the protocol library's traceback for a request it answered with a
    JSON-RPC error (bad params, an unknown session): the client has the one-line error;
    nor one for output the client no longer takes (its pipe closed, or dropped when it
    stopped reading). A bug's own traceback (logged before it is answered as an
    internal error) stays."""
    from acp import RequestError

    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, (RequestError, ConnectionError))


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


class _Unanswered:
    """Stream observer: the ids of requests read from the client and not answered yet."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._changed = asyncio.Event()

    def observe(self, event: Any) -> None:
        message = event.message
        if "id" not in message:
            return
        incoming = getattr(event.direction, "value", event.direction) == "incoming"
        if incoming and "method" in message:
            self.ids.add(message["id"])
        elif not incoming and "method" not in message:
            self.ids.discard(message["id"])
            self._changed.set()

    async def answered(self) -> None:
        """Wait until every request read so far was answered."""
        while self.ids:
            self._changed.clear()
            await self._changed.wait()


def _answer_bad_line(writer: asyncio.StreamWriter, bad: BadLine) -> None:
    """JSON-RPC's answer to a line that is not a request (id null when it cannot be read,
    as the spec says), and one line on stderr; the line itself is not echoed."""
    reply = {"jsonrpc": "2.0", "id": bad.id, "error": {"code": bad.code, "message": bad.message}}
    writer.write((json.dumps(reply) + "\n").encode())  # one write: never inside another message
    logging.getLogger(__name__).warning("a line of input %s; answered with JSON-RPC error %d (%s).",
                                        bad.why, bad.code, bad.kind.lower())


async def serve(options: Any, in_fd: int, out_fd: int) -> None:
    """Run the agent until end of input or a signal, then close every session.

    At the end of input, running prompts are cancelled (they answer ``cancelled``) and
    every request already read gets its answer before the connection closes:
    ``crystal acp < requests.jsonl`` reads the whole file at once and would otherwise
    answer nothing."""
    from acp import run_agent

    from crystal_kernel.acp.agent import CrystalAgent
    from crystal_kernel.acp.stdio import close_writer, drop_stuck_output, open_streams

    agent = CrystalAgent(options)
    reader, writer = await open_streams(in_fd, out_fd, STREAM_LIMIT)
    unanswered = _Unanswered()
    reader.on_bad_line(lambda bad: _answer_bad_line(writer, bad))

    async def finish_requests() -> None:
        await reader.lines_read()  # the receive loop has taken every line
        await asyncio.sleep(0)  # requests it just took start (a prompt starts its turn)
        agent.cancel_turns()
        await unanswered.answered()
        await agent.background_sent(DRAIN_SECONDS)

    async def end_of_input() -> None:
        try:
            await asyncio.wait_for(finish_requests(), DRAIN_SECONDS)
        except asyncio.TimeoutError:
            pass
        finally:
            reader.release_eof()

    ending: list[asyncio.Task[Any]] = []

    async def watch_output() -> None:
        dropped = await drop_stuck_output(writer)
        logging.getLogger(__name__).warning(
            "the client stopped reading the agent's output; %d bytes of it were not sent.", dropped)

    def shut_down() -> None:
        # Shutting down waits for queued output: a client that no longer reads it must
        # not keep the agent (and its sessions' processes) alive.
        if not ending:
            ending.append(asyncio.ensure_future(watch_output()))

    def input_ended() -> None:
        shut_down()
        ending.append(asyncio.ensure_future(end_of_input()))

    reader.on_end(input_ended)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None  # this coroutine runs as asyncio.run's task

    def on_signal() -> None:
        shut_down()
        main.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal)
    try:
        # Unstable protocol parts used: elicitation (questions), session/close and resume.
        await run_agent(agent, writer, reader, use_unstable_protocol=True, observers=[unanswered.observe])
    except asyncio.CancelledError:
        # A signal: shut down normally below (3.11+ counts cancellations; 3.10 needs nothing).
        if sys.version_info >= (3, 11):
            main.uncancel()
    except ConnectionError:
        pass  # the output was dropped (drop_stuck_output) or the client closed it
    finally:
        shut_down()  # closing the sessions may write too
        await agent.close_all()
        await close_writer(writer)
        for task in ending:
            task.cancel()
