"""``crystal space``: JupyterLab on the workspace, with Crystal, opened on a Crystal notebook.

What it adds over ``jupyter lab`` (docs/commands.md): the Crystal server extension is
on whatever the Jupyter config says; a Crystal notebook is opened for a new session or
for ``--resume ID``; the URL printed (and opened) is that notebook's, with its token;
the process flags every front takes (``--disable-tool``, ``--prompt-set``,
``--prompt-attachments``, ``--prompt-attachment``, the model flags) reach every Crystal
kernel the space starts; one Ctrl-C stops the server and shuts down its kernels (no
confirmation question), and nothing it started is left running. Like every host process
it holds the model keys out of its own environment (TRUST-6): only Crystal kernels get
them (space_kernels.py).

How the flags reach the kernels: a kernelspec of this space's own, named ``crystal`` like
the installed one and found first (``KernelSpecManager.kernel_dirs``), whose argv carries
``--workspace`` and the flags (the way ``crystal kernel install`` bakes flags in). Not
the environment: ``CRYSTAL_ARGS`` would also reach every process the kernels start
(tools, a nested Jupyter), and Python kernels. Notebooks keep the plain kernelspec name
``crystal``, so they open anywhere, without the flags (FL-5: flags belong to a process,
never to files).

Where the space keeps its files (SANDBOX-2): the kernelspec, and the Jupyter runtime
folder (the server's file with its token, the kernels' connection files with their
keys), live in the space's host-only folder ``{home}/run/space-<pid>``
(core/host_folders.py, mode 0700), removed when the space stops. Not in temp: a tool
process writes there, and the space's next Crystal kernel would run the ``argv`` it
wrote, unsandboxed, with the model key. Crystal kernels find their space's server there
(live_notebook.py).

Only this module (and the jupyter front) imports Jupyter: ``crystal space`` reaches it
through cli's SUBCOMMAND_MODULES, which loads it by name.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import urllib.parse
from pathlib import Path
from typing import Any, cast

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import terminal_safe

SERVER_EXTENSION = "crystal_kernel.jupyter.server_ext"


def add_subparsers(sub: Any) -> None:
    from crystal_kernel.host.flags import add_model_flags, add_process_flags, add_reasoning_flag, add_session_flags

    space = sub.add_parser(
        "space", help="JupyterLab on the workspace, opened on a Crystal notebook",
        description="Start JupyterLab on the workspace with the Crystal extension and open a Crystal notebook "
                    "for a new session (or the saved session --resume names). Prints the notebook's URL with its "
                    "token. The process flags reach every Crystal kernel of the space. Ctrl-C stops it and shuts "
                    "down its kernels.")
    space.add_argument("--workspace", default=".", metavar="DIR", help="the workspace root (default: .)")
    add_session_flags(space, resume_help="open a notebook that continues this saved session (default: a new "
                                         "notebook, a new session); --session ID does the same for a saved one")
    space.add_argument("--port", type=int, default=8888, metavar="N",
                       help="the port to listen on, or the next free one after it (default: 8888)")
    space.add_argument("--no-browser", dest="open_browser", action="store_false",
                       help="do not open a web browser (default: open the notebook in one)")
    add_model_flags(space)
    add_reasoning_flag(space)
    add_process_flags(space)
    space.add_argument("jupyter_options", nargs="*", metavar="-- JUPYTER_OPTION",
                       help="options for JupyterLab after --, e.g. -- --ip=0.0.0.0 --allow-root (default: none)")
    space.set_defaults(handler=cmd_space)


def kernel_flags(ns: argparse.Namespace, workspace: Path) -> list[str]:
    """The kernel's argv after ``-f CONNECTION_FILE``: the space's workspace and the
    Crystal flags given, checked with the kernel's own checks (a bad one starts nothing)."""
    from crystal_kernel.jupyter.cli import check_flags
    from crystal_kernel.jupyter.options import parse, to_argv

    ns.workspace = str(workspace)
    flags = to_argv(ns)
    options, rest = parse(flags, environ={})
    if rest:
        raise UserError(f"Unknown kernel flags: {' '.join(rest)}")
    check_flags(options)
    return flags


def cmd_space(ns: argparse.Namespace) -> int:
    from crystal_kernel.core.host_folders import process_folder, remove_folder
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.jupyter.space_notebook import space_notebook

    workspace = Path(ns.workspace).expanduser().resolve()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{workspace}' is not a folder.")
    if not 0 < ns.port < 65536:
        raise UserError(f"--port {ns.port} is not a port number (1-65535).")
    stray = [word for word in ns.jupyter_options if not word.startswith("-")]
    if stray:
        raise UserError(f"Unexpected argument '{stray[0]}': crystal space opens its own notebook; JupyterLab options "
                        "go after --, e.g. crystal space -- --ip=0.0.0.0.")
    flags = kernel_flags(ns, workspace)
    if ns.session is not None and not saved(workspace, ns.session):
        raise UserError(f"There is no saved session {ns.session} in {workspace}: crystal space --session continues "
                        "a saved one (each new notebook of a space starts its own session).")
    notebook = space_notebook(workspace, home_dir(), ns.resume or ns.session)
    withhold_keys(ns)
    data = process_folder(home_dir(), "space")  # SANDBOX-2: host-only, not temp
    up: list[bool] = []  # the server came up (its URL was printed)
    try:
        return serve(workspace, notebook.path.relative_to(workspace).as_posix(), flags, data, ns, up)
    finally:
        remove_folder(data)
        if notebook.created and not up:
            # A start that failed (or was stopped before its URL) leaves no notebook behind:
            # the one it made for the session nobody opened goes again.
            notebook.path.unlink(missing_ok=True)


def saved(workspace: Path, session_id: str) -> bool:
    """Whether ``session_id`` is a saved session of ``workspace``."""
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.host.store import SessionStore

    return SessionStore(workspace, home_dir()).exists(session_id)


def withhold_keys(ns: argparse.Namespace) -> None:
    """TRUST-6: the model key variables leave this process's environment (unless
    ``passKeysToTools``); only Crystal kernels get them (space_kernels.py)."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.secrets import withdraw_keys
    from crystal_kernel.host.flags import overrides_from_args

    withdraw_keys(load_config(None, overrides=overrides_from_args(ns)))  # registers apiKeyEnv first


def write_kernelspec(data: Path, flags: list[str]) -> Path:
    """The space's ``crystal`` kernelspec in ``data/kernels`` (``data``: the space's
    host-only folder); returns that folder."""
    from crystal_kernel.jupyter.kernelspec import KERNEL_NAME, kernel_json

    kernels = data / "kernels"
    (kernels / KERNEL_NAME).mkdir(parents=True, mode=0o700)
    (kernels / KERNEL_NAME / "kernel.json").write_text(json.dumps(kernel_json(flags), indent=2), encoding="utf-8")
    return kernels


def start_options(given: list[str]) -> list[str]:
    """The server options the space adds unless the person's (``given``, after ``--``) set
    them: as root, Jupyter's allow-root (as ``make lab`` passes it; without it the server
    refuses root and exits); and warnings and errors only in the logs of the server and
    its extensions, so the URL is among the first lines (``-- --log-level=INFO`` brings the
    rest back). Jupyter refuses an option given twice, hence "unless"."""
    def named(*words: str) -> bool:
        return any(word in option.replace("-", "_") for option in given for word in words)

    options = [] if named("log_level") else ["--Application.log_level=WARN"]
    if os.geteuid() == 0 and not named("allow_root"):
        options.append("--ServerApp.allow_root=True")
    return options


def serve(workspace: Path, notebook: str, flags: list[str], data: Path, ns: argparse.Namespace,
          up: list[bool]) -> int:
    """Run JupyterLab (jupyter_server with the jupyterlab extension) until Ctrl-C or SIGTERM;
    ``up`` gets True once the server listens and its URL is printed."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyterlab.labapp import LabApp

    from crystal_kernel.jupyter.space_kernels import SpaceKernelManager
    from crystal_kernel.jupyter.space_quiet import quiet_extensions, quiet_stop

    tree = f"/lab/tree/{urllib.parse.quote(notebook)}"
    argv = [f"--ServerApp.root_dir={workspace}", f"--ServerApp.port={ns.port}", f"--LabApp.default_url={tree}",
            f"--ServerApp.open_browser={ns.open_browser}", *start_options(ns.jupyter_options), *ns.jupyter_options]
    # As LabApp.launch_instance does, with Crystal's server extension on whatever the
    # Jupyter config says (the lab extension comes with the package's data files).
    server = LabApp.make_serverapp(jpserver_extensions={LabApp.get_extension_package(): True, SERVER_EXTENSION: True},
                                   kernel_manager_class=SpaceKernelManager)
    # SANDBOX-2: the server's file (its token) and the kernels' connection files (their
    # keys) go to the space's host-only folder, not the person's Jupyter runtime folder,
    # which tool processes read. Set before initialize: the kernel manager takes it there.
    server.runtime_dir = str(data / "runtime")
    server.aliases.update(LabApp.aliases)
    server.initialize(argv=argv, starter_extension=LabApp.name, find_extensions=True)
    quiet_extensions(server)  # other servers' banners and INFO lines, where the space starts them
    if server.gateway_config.gateway_enabled:
        raise UserError("crystal space runs its kernels here, not on a gateway; use jupyter lab with a "
                        "kernelspec from crystal kernel install on the gateway's side.")
    # The space's kernelspec first (kernel_dirs is not configurable, so set on the one
    # manager the kernel manager and the kernelspec API share, before anything runs).
    specs = cast(KernelSpecManager, server.kernel_spec_manager)  # a traitlets Instance: typed as object
    specs.kernel_dirs = [str(write_kernelspec(data, flags)), *specs.kernel_dirs]
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        if stopping:
            say("Crystal space: still stopping (shutting down the kernels)…")
            return
        stopping = True
        say("Crystal space: stopping; shutting down the kernels…")
        loop = getattr(server.io_loop, "asyncio_loop", None)  # tornado's asyncio IOLoop (the only one left)
        if loop is not None:
            quiet_stop(loop)
        server.stop(from_signal=True)  # kernels shut down, then the loop ends

    # One Ctrl-C stops the space: no "Shut down this Jupyter server (y/[n])?" (the way
    # JupyterHub runs it), and SIGTERM does the same.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    def announce() -> None:
        url = server.connection_url.rstrip("/") + tree + "?" + urllib.parse.urlencode(
            {"token": server.identity_provider.token})
        say(f"Crystal space on {workspace}: open {notebook} at\n    {url}\n"
            "Ctrl-C stops the space and shuts down its kernels.")
        up.append(True)

    server.io_loop.add_callback(announce)  # after the listening socket is bound
    server.start()
    say("Crystal space: stopped.")
    return 0


def say(text: str) -> None:
    print(terminal_safe(text), flush=True)
