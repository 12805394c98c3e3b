"""The Crystal kernel: every cell is a turn for the agent; a cell starting with ``/`` is
a slash command (SPEC §11); a cell whose first line is ``%%python`` is the person's own
Python, run as IPython would run it (NB-1, person_cells.py).

Built on ipykernel >= 7.4 (DESIGN.md, "Decisions already measured"): a subclass of
IPythonKernel, so comms, widgets, display and the notebook tools' IPython namespace
all work; ``do_execute`` creates the cell's task itself so output follows the cell;
widgets are answered while the cell runs; the stop button arrives as an
``interrupt_request`` message (kernelspec ``interrupt_mode: message``) and cancels the
turn from the control thread.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipykernel.ipkernel import IPythonKernel
from jupyter_client.session import Session as WireSession
from traitlets import List

from crystal_kernel import __version__ as _version
from crystal_kernel.jupyter import parameters
from crystal_kernel.jupyter.notebook_front import NotebookFront
from crystal_kernel.jupyter.notebook_turn import CellOutcome, run_notebook_turn
from crystal_kernel.jupyter.options import KernelOptions
from crystal_kernel.jupyter.standing_stop import StandingStop

if TYPE_CHECKING:
    from crystal_kernel.host.loop import Turn
    from crystal_kernel.host.session import Session

_OPTIONS: KernelOptions | None = None
#: How long after its first kernel_info reply the kernel imports the host that its first
#: cell needs, and how long after start at the latest (a client that never asks).
WARM_AFTER_SECONDS = 0.1
WARM_AT_LATEST_SECONDS = 3.0


def _import_host() -> None:
    """Import what the first cell opens (the session and the notebook tools) ahead of it."""
    import crystal_kernel.host.bootstrap
    import crystal_kernel.jupyter.notebook_session
    import crystal_kernel.jupyter.notebook_tools  # noqa: F401

def set_options(options: KernelOptions) -> None:
    """Called by the kernel's main() before the app starts."""
    global _OPTIONS
    _OPTIONS = options


def current_options() -> KernelOptions:
    if _OPTIONS is None:
        from crystal_kernel.jupyter.options import parse

        set_options(parse([])[0])
    assert _OPTIONS is not None
    return _OPTIONS


BANNER = "Crystal: a coding agent in your notebook. Each cell is a turn; /help lists the commands."


class CrystalKernel(IPythonKernel):
    implementation = "crystal"
    implementation_version = _version
    # Kernel declares `banner: str`; IPythonKernel turns it into a property (and silences
    # its own checker there). A string, as Kernel declares: mypy agrees, pyright does not.
    banner = BANNER  # pyright: ignore[reportAssignmentType]
    language_info = {
        "name": "markdown",
        "mimetype": "text/markdown",
        "file_extension": ".md",
        "codemirror_mode": "markdown",
        "pygments_lexer": "markdown",
    }
    help_links: List[Any] = List([]).tag(config=True)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        _guard_process_group()
        self.options = current_options()
        # The notebook's session (opened on the first cell) and the steps after the door.
        self.front = NotebookFront(self.shell, open_session=self._open, continues_notebook=True,
                                   unattended=self.options.unattended, log=self.log)
        self._turn: Turn | None = None
        self._cell_task: asyncio.Task[CellOutcome] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._stop = StandingStop()  # ROBUST-3: a Stop holds until the turn has ended
        from crystal_kernel.jupyter.person_cells import PersonCells

        self._person_cells = PersonCells()  # NB-1: told to the next turn, then forgotten
        self._python_cell = False  # a %%python cell runs now (the stop button interrupts it)
        self._host_warm: object | None = None  # the start's import timer (start, kernel_info_request)
        from crystal_kernel.jupyter import notebook_plugin

        notebook_plugin.register()  # python, variables, cell_output: this front's own tools
        from crystal_kernel.jupyter.comm_status import announce_concurrent_comms

        announce_concurrent_comms(self)  # typing into a form arrives whole
        from crystal_kernel.jupyter.live_outputs import register_comm_target

        register_comm_target(self)  # reload and restart: the lab extension asks what is live
        from crystal_kernel.jupyter import sidebar_comm

        sidebar_comm.register_comm_target(self)  # a remote kernel: the sidebar asks it, not the server
        from crystal_kernel.jupyter.front_ends import watch

        watch(self)  # from the start: a headless run's form ends quickly (front_ends.py)

    def start(self) -> None:
        super().start()
        # The host (pydantic models, the session, the notebook tools) is imported after the
        # kernel has answered its first kernel_info, not before: start to idle is what a
        # person waits for; the import then runs while they type the first cell, on this
        # thread (no import races with the cell's own imports).
        self._host_warm = self.io_loop.call_later(WARM_AT_LATEST_SECONDS, _import_host)

    async def kernel_info_request(self, stream: Any, ident: Any, parent: Any) -> None:
        await super().kernel_info_request(stream, ident, parent)
        if self._host_warm is not None:
            self.io_loop.remove_timeout(self._host_warm)
            self._host_warm = None
            self.io_loop.call_later(WARM_AFTER_SECONDS, _import_host)

    # ----- kernel_info ------------------------------------------------------------------------
    @property
    def kernel_info(self) -> dict[str, Any]:
        info = dict(super().kernel_info)
        info["supported_features"] = []  # no debugger: cells are not Python
        info["language_info"] = self.language_info
        from crystal_kernel.jupyter.status_info import kernel_status

        info["crystal"] = kernel_status(self)  # the lab extension's status bar item reads it
        return info

    # ----- the session ----------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        if self.crystal is not None:
            return self.crystal.workspace
        return Path(self.options.workspace or os.getcwd())

    @property
    def crystal(self) -> Session | None:
        """The agent session, None until the first cell opens it."""
        return self.front.session

    def ensure_session(self) -> Session:
        return self.front.ensure_session()

    def _open(self) -> Session:
        from crystal_kernel.host.bootstrap import SessionOptions, open_session

        # TRUST-4, TRUST-6: the door withdraws the key variables from this process,
        # which runs the python tool's code (keys="withdraw", the default).
        return open_session(SessionOptions(
            self.workspace, overrides=self.options.overrides, flags=self.options.process_flags(),
            person_present=not self.options.unattended, notebook=True,
        ))

    # ----- execution ------------------------------------------------------------------------------
    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: Any = None, allow_stdin: bool = False, *,
                         cell_meta: Any = None, cell_id: Any = None) -> dict[str, Any]:
        if silent:
            # Frontends and extensions send silent requests with Python code (variable
            # inspectors, widget managers); they are never meant as prompts. Run them in
            # the namespace, as IPython would, and never call the model.
            python_reply: dict[str, Any] = await super().do_execute(
                code, silent, store_history, user_expressions, allow_stdin, cell_meta=cell_meta, cell_id=cell_id)
            return python_reply
        python = _person_code(code)  # a bad %%python line: _run_cell reports it, as the cell's error
        if python is not None:
            return await self._run_person_cell(code, python, store_history, user_expressions, allow_stdin,
                                               cell_meta=cell_meta, cell_id=cell_id)
        shell = self.shell
        assert shell is not None  # IPythonKernel makes its shell when it starts
        count = shell.execution_count
        if store_history and not silent:
            shell.execution_count += 1
        self._allow_stdin = allow_stdin
        self._loop = asyncio.get_running_loop()
        self._stop_requested = False
        from crystal_kernel.jupyter.notebook_tools import clear_interrupt

        clear_interrupt()
        # The task carries this cell's parent header (contextvars), so everything it and
        # its children display lands in this cell, even after the cell has ended.
        task = asyncio.ensure_future(self._run_cell(code))
        self._cell_task = task
        try:
            with self._sigint_cancels():
                await asyncio.wait({task})
        finally:
            self._cell_task = None
        if task.cancelled():
            outcome = CellOutcome.error("KeyboardInterrupt", "Interrupted.")
        elif task.exception() is not None:
            exc = task.exception()
            self.log.error("Crystal cell failed", exc_info=exc)
            self._show_error(f"Internal error: {type(exc).__name__}: {exc}")
            outcome = CellOutcome.error(type(exc).__name__, str(exc))
        else:
            outcome = task.result()
        reply: dict[str, Any] = {"status": outcome.status, "execution_count": count,
                                 "user_expressions": {}, "payload": []}
        if outcome.status == "error":
            # Batch runs report a failed cell from the reply's traceback (nbclient,
            # nbconvert --execute) or from the cell's error output (papermill): both say
            # "ename: evalue", as a Python cell's would. A person's stop is not an error
            # worth a red box (the cell already says it was interrupted).
            error = {"ename": outcome.ename, "evalue": outcome.evalue,
                     "traceback": [f"{outcome.ename}: {outcome.evalue}"]}
            reply.update(error)
            if outcome.ename != "KeyboardInterrupt":
                self.send_response(self.iopub_socket, "error", error)
        return reply

    async def _run_person_cell(self, code: str, python: str, store_history: bool, user_expressions: Any,
                               allow_stdin: bool, *, cell_meta: Any, cell_id: Any) -> dict[str, Any]:
        """NB-1: a ``%%python`` cell runs exactly as in a Python notebook (ipykernel's own
        execution: streams, displays, execute_result, the error's traceback, ``In``/``Out``,
        the execution count) and is remembered for the next turn; the model is not called."""
        from crystal_kernel.jupyter.notebook_tools import clear_interrupt, track_cell_errors
        from crystal_kernel.jupyter.person_cells import body, outcome_line

        track_cell_errors(self.shell)  # cell_output {}: a failed %%python cell newer than the last Out[n]
        clear_interrupt()  # a stop of an earlier cell is spent
        self._python_cell = True
        try:
            reply: dict[str, Any] = await super().do_execute(
                python, False, store_history, user_expressions, allow_stdin, cell_meta=cell_meta, cell_id=cell_id)
        finally:
            self._python_cell = False
        count = reply.get("execution_count")
        self._person_cells.add(count if isinstance(count, int) else 0, body(code), outcome_line(reply))
        return reply

    async def _run_cell(self, code: str) -> CellOutcome:
        from crystal_kernel.core.errors import UserError

        text = code.strip()
        if not text:
            return CellOutcome()
        shell = self.shell
        assert shell is not None  # IPythonKernel makes its shell when it starts
        try:
            from crystal_kernel.jupyter.person_cells import split

            split(code)  # a bad %%python line: one line, nothing run (do_execute ran a good one)
            # {NAME} of a parameter set earlier (papermill -p, docs/kernel.md).
            code, notes = parameters.interpolate(code, shell.user_ns)
            text = code.strip()
            if text.startswith("/"):
                from crystal_kernel.jupyter.cell_commands import run_command_cell

                return await run_command_cell(self.front, text, shell.user_ns)
            from crystal_kernel.jupyter.live_outputs import running_cell

            with running_cell():  # a page reloaded mid-turn gets the cell back (FORM-2)
                return await self._turn_cell(code, notes)
        except UserError as exc:  # shown once, as the cell's error output (do_execute)
            return CellOutcome.error("UserError", str(exc))

    async def _turn_cell(self, code: str, notes: list[str]) -> CellOutcome:
        session = self.ensure_session()

        def track(turn: Turn | None) -> None:
            self._turn = turn

        told = len(self._person_cells)
        ran = self._person_cells.take_note()  # NB-1: the person's %%python cells since the last turn
        if ran:
            cells = "cell" if told == 1 else "cells"
            notes = [*notes, f"The agent is told about the {told} %%python {cells} you ran since the last turn."]
        try:
            outcome = await run_notebook_turn(
                session, code, notes=notes, person_cells=ran, interactive=not self.options.unattended,
                ask_timeout=self.options.ask_timeout, log=self.log, trust_cards=self.front.state, track=track,
                stopped=lambda: self._stop_requested)
        finally:
            self.front.remember()
        return CellOutcome.of_turn(outcome)

    def _show_error(self, text: str) -> None:
        from crystal_kernel.jupyter.cards import error_bundle
        from crystal_kernel.jupyter.render import IPythonOutput

        IPythonOutput().show(error_bundle(text))

    # ----- interrupts -------------------------------------------------------------------------
    def _cancel_current(self) -> None:
        self._stop_requested = True  # seen by the turn even before its task exists
        if self._turn is not None:
            self._stop.cancel(self._turn, lambda: self._turn)  # again while it runs (standing_stop.py)
        elif self._cell_task is not None and not self._cell_task.done():
            self._cell_task.cancel()

    def request_interrupt(self) -> None:
        """Cancel the running turn; callable from any thread."""
        from crystal_kernel.jupyter.notebook_tools import note_interrupt

        if note_interrupt() or self._python_cell:
            # The python tool or a %%python cell is running code on the main thread:
            # interrupt it like a normal cell would be. A real signal (not
            # _thread.interrupt_main) so that a blocking call such as time.sleep returns;
            # our SIGINT handler, set for the turn, raises KeyboardInterrupt there (in a
            # %%python cell ipykernel's handler does, or cancels an async cell).
            main = threading.main_thread().ident
            if main is not None:  # the main thread has run this process from its start
                signal.pthread_kill(main, signal.SIGINT)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_current)

    async def interrupt_request(self, stream: Any, ident: Any, parent: Any) -> None:
        # Runs on the control thread (interrupt_mode "message"). Unlike ipykernel's, it
        # sends no SIGINT to the process group: tool processes are stopped by the turn.
        session = self.session  # a traitlets Instance of jupyter_client's Session: typed as object
        if not isinstance(session, WireSession):
            return
        self.request_interrupt()
        session.send(stream, "interrupt_reply", {"status": "ok"}, parent, ident=ident)

    @contextmanager
    def _sigint_cancels(self) -> Iterator[None]:
        """SIGINT (signal-mode kernelspecs, Ctrl-C in a console) cancels the turn too."""
        from crystal_kernel.jupyter.notebook_tools import note_interrupt, sigint_cancels

        with sigint_cancels(self._loop, self._cancel_current, note_interrupt):
            yield

    # ----- completion, inspection --------------------------------------------------------------------
    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:
        from crystal_kernel.core.paths import home_dir
        from crystal_kernel.host.completion import attachment_names, complete, prompt_set_names, session_sources

        cursor = len(code) if cursor_pos is None else cursor_pos
        python = _person_code(code)
        if python is not None:  # NB-1: a %%python cell completes as Python
            return await self._complete_python(code, python, cursor)
        if self.crystal is not None:
            return complete(code, cursor, self.workspace, **session_sources(self.crystal))
        # No session before the first cell: no jobs yet; the prompt names are on disk.
        home, workspace = home_dir(), self.workspace
        return complete(code, cursor, workspace, prompt_sets=lambda: prompt_set_names(home),
                        attachments=lambda: attachment_names(home, workspace))

    async def _complete_python(self, code: str, python: str, cursor: int) -> dict[str, Any]:
        # split() added one character ("#") before the marker: positions after it move by one.
        shift = len(python) - len(code)
        got = super().do_complete(python, cursor + shift)
        reply: dict[str, Any] = dict(await got if asyncio.iscoroutine(got) else got)
        for key in ("cursor_start", "cursor_end"):
            if isinstance(reply.get(key), int):
                reply[key] = max(0, reply[key] - shift)
        return reply

    async def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0,
                         omit_sections: Any = ()) -> dict[str, Any]:
        python = _person_code(code)
        if python is not None:  # NB-1: Shift+Tab in a %%python cell shows Python's help
            got = super().do_inspect(python, cursor_pos + len(python) - len(code), detail_level, omit_sections)
            return dict(await got if asyncio.iscoroutine(got) else got)
        return {"status": "ok", "found": False, "data": {}, "metadata": {}}

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        return {"status": "complete"}

    # ----- shutdown ----------------------------------------------------------------------------------
    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        self.front.cancel_background()
        if self.crystal is not None:
            try:
                await asyncio.wait_for(self.crystal.close(), timeout=15)
            except Exception as exc:  # shutting down anyway; say why in the log
                self.log.warning("Closing the Crystal session failed: %s", exc)
        shutdown_reply: dict[str, Any] = super().do_shutdown(restart)
        return shutdown_reply


def _person_code(code: str) -> str | None:
    """The Python of a ``%%python`` cell (person_cells.split), None for anything else."""
    from crystal_kernel.jupyter.person_cells import NotPersonCell, split

    try:
        return split(code)
    except NotPersonCell:
        return None


_GROUP_GUARD: list[Any] = []


def _guard_process_group() -> None:
    """ROBUST-3: processes the python tool's code starts die with this kernel, SIGKILL
    included. Jupyter (and gateways) start a kernel as a process group leader; a guard
    process stops the group when the kernel dies (jobs/group_guard.py). Once per
    process, from the main thread (the parent-death signal follows the starting thread)."""
    import threading

    if _GROUP_GUARD or threading.current_thread() is not threading.main_thread():
        return
    from crystal_kernel.jobs.guarded import start_group_guard

    _GROUP_GUARD.append(start_group_guard())


def main(argv: list[str] | None = None) -> None:
    """``python -m crystal_kernel.jupyter -f CONNECTION_FILE [crystal flags]``."""
    import sys

    from crystal_kernel.core.errors import UserError
    from crystal_kernel.jupyter.options import check, parse

    args = sys.argv[1:] if argv is None else argv
    try:
        options, rest = parse(args)
        check(options)
    except UserError as exc:
        print(f"crystal kernel: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    set_options(options)
    from ipykernel.kernelapp import IPKernelApp

    # TRUST-2: the notebook's folder stays off sys.path, so the host's own (lazy)
    # imports and its plugin scan never load a cloned repository's files; the python
    # tool puts it back while the model's code runs (notebook_tools.cwd_importable).
    IPKernelApp.launch_instance(argv=rest, kernel_class=CrystalKernel, ignore_cwd=True)
