"""``%crystal`` / ``%%crystal``: the Crystal agent in a normal IPython kernel.

``%load_ext crystal_kernel`` registers the magic and an input transformer
(:mod:`crystal_kernel.jupyter.magics_transform`) that turns a ``%%crystal`` cell, or a
``%crystal`` line standing alone at the top level of a cell, into an awaited coroutine:
the cell runs as an async cell, so on ipykernel >= 7.4 the question forms and approval
buttons are answered while the turn waits, exactly as in the Crystal kernel, and the
stop button cancels the turn. The turn is rendered by the kernel's renderer; slash
commands go through the kernel's command handling. One session per kernel.

``x = %crystal PROMPT`` (or a ``%crystal`` line inside a function) is the synchronous
form (:mod:`crystal_kernel.jupyter.magics_sync`): it returns the final answer's text
and shows no widgets — questions are unavailable and "ask" approvals are denied.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter.magics_args import MagicOptions, merged_flags
from crystal_kernel.jupyter.magics_sync import SyncForm, raise_for, running_loop
from crystal_kernel.jupyter.nbrun import NOTEBOOK_RUN_ENV
from crystal_kernel.jupyter.notebook_front import NotebookFront
from crystal_kernel.jupyter.notebook_turn import TurnOutcome, run_notebook_turn
from crystal_kernel.jupyter.standing_stop import StandingStop

if TYPE_CHECKING:
    from crystal_kernel.host.loop import Turn
    from crystal_kernel.host.session import Session

MAGICS_HELP = """
With %load_ext crystal_kernel:
%%crystal [options]            the cell body is a turn (or /commands, one per line)
%crystal PROMPT                a one-line turn;  %crystal /command   a command
x = %crystal PROMPT            synchronous: returns the final answer's text; no widgets
                               (questions unavailable, approvals that ask are denied)
{name}                         the value of a notebook variable ({{ and }} for braces)
@path                          attaches that file's content to the turn
Options (they change the session): --mode plan|work, --approval MODE, --model [P:]M, --reasoning EFFORT,
  --prompt-set NAME, --prompt-attachments on|off, --prompt-attachment NAME,
  --disable-tool NAME, --new (a fresh session)"""

MIN_IPYKERNEL = (7, 4)


def widget_problem(shell: Any) -> str | None:
    """Why widgets cannot be answered in this shell, or None when they can."""
    if getattr(shell, "kernel", None) is None:
        return "This IPython is not a Jupyter kernel"
    try:
        from ipykernel._version import __version__ as ipykernel_version

        version = tuple(int(x) for x in re.findall(r"\d+", ipykernel_version)[:2])
    except Exception:
        return "ipykernel's version is unknown"
    if version < MIN_IPYKERNEL:
        return f"ipykernel {ipykernel_version} cannot answer widgets while a cell runs (7.4 or newer can)"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return "ipywidgets is not installed"
    return None


class MagicsHost(SyncForm):
    """One per IPython shell: the session, the running turn and its interrupt.

    The steps it shares with the Crystal kernel after the front door (attach the
    notebook, remember the session, spawn a command's live view) are its
    :class:`~crystal_kernel.jupyter.notebook_front.NotebookFront`, which slash commands
    (:mod:`crystal_kernel.jupyter.cell_commands`) run against.
    """

    def __init__(self, shell: Any):
        from crystal_kernel.jupyter import notebook_plugin
        from crystal_kernel.jupyter.options import parse

        notebook_plugin.register()  # python, variables, cell_output: this front's own tools
        self.shell = shell
        self.options = parse([])[0]  # CRYSTAL_ARGS, as for the kernel
        # The session (opened by the first magic) and the steps after the door; it neither
        # continues the notebook's session nor names it current: the Crystal kernel's job.
        self.front = NotebookFront(shell, open_session=lambda: self._open(None), continues_notebook=False,
                                   unattended=self.options.unattended)
        self.no_widgets = widget_problem(shell)
        self._told_no_widgets = False
        self._turn: Turn | None = None
        self._turn_loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = False
        self._stop = StandingStop()

    # ----- the session ------------------------------------------------------------------------
    @property
    def crystal(self) -> Session | None:
        """The agent session, None until the first magic opens it."""
        return self.front.session

    @property
    def _main_loop(self) -> asyncio.AbstractEventLoop | None:
        """The kernel's loop, where the synchronous form's live views run."""
        return self.front.main_loop

    @_main_loop.setter
    def _main_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.front.main_loop = loop

    def ensure_session(self, opts: MagicOptions | None = None) -> Session:
        if self.crystal is None and opts is not None:
            self.front.attach(self._open(opts))
        return self.front.ensure_session()

    def _open(self, opts: MagicOptions | None) -> Session:
        from crystal_kernel.core.config import PROVIDERS
        from crystal_kernel.host.bootstrap import SessionOptions, open_session

        overrides = dict(self.options.overrides)
        flags = self.options.process_flags()
        if opts is not None:
            if opts.model:
                name, sep, model = opts.model.partition(":")
                if sep and name in PROVIDERS:
                    overrides.update(provider=name, model=model)
                else:
                    overrides["model"] = opts.model
            overrides.update({k: v for k, v in (("mode", opts.mode), ("approval", opts.approval),
                                                ("reasoningEffort", opts.reasoning)) if v})
            flags = merged_flags(flags, opts)
        workspace = Path(self.options.workspace or os.getcwd())
        # TRUST-4: this is the person's own kernel, so its os.environ keeps the keys (their
        # cells may use them; keys="person_keeps"); the python tool's code runs with them
        # withdrawn, and the door masks the copy /proc/PID/environ shows.
        return open_session(SessionOptions(workspace, overrides=overrides, flags=flags, keys="person_keeps",
                                           person_present=not self.options.unattended, notebook=True))

    def _refuse_if_busy(self) -> None:
        if self.crystal is not None and self.crystal.busy:
            raise UserError("A Crystal turn is already running in this kernel.")

    async def apply(self, opts: MagicOptions) -> list[str]:
        """Apply a magic's options to the session (opening it if needed). Everything is
        checked first, so a bad option changes nothing. Returns lines to show."""
        from crystal_kernel.core.config import APPROVAL_MODES
        from crystal_kernel.host.commands import switch_model

        if opts.approval and opts.approval not in APPROVAL_MODES:
            raise UserError(f"Unknown approval mode '{opts.approval}'; use one of: {', '.join(APPROVAL_MODES)}.")
        if opts.any():  # options change the session; a magic without any may list during a turn
            self._refuse_if_busy()
        if opts.new or self.crystal is None:
            old = self.crystal
            session = self._open(opts)
            self.front.attach(session)
            if old is not None:
                await self._retire(old)
                self.front.remember()
                return [f"New session {session.id}."]
            return []
        session = self.crystal
        new_flags = None
        if opts.changes_flags():
            from crystal_kernel.prompts.selection import check_prompt_flags
            from crystal_kernel.tools.catalog import check_disabled

            new_flags = merged_flags(session.flags, opts)
            new_flags.disable_tool = check_disabled(new_flags.disable_tool)
            check_prompt_flags(session.home, session.workspace, new_flags)
        if opts.model:  # may fail (unknown provider, no key): before anything else changes
            switch_model(session, opts.model)  # an option, like a flag: not saved
        if opts.mode:
            session.set_mode(opts.mode)
        if opts.approval:
            session.set_approval(opts.approval)
        if opts.reasoning:  # for this session, like --mode (not saved)
            from crystal_kernel.core.config import check_reasoning_effort

            session.set_reasoning_effort(check_reasoning_effort(opts.reasoning, "--reasoning"))
        if new_flags is not None:
            session.set_flags(new_flags)
        return []

    async def _retire(self, session: Session) -> None:
        """Close a replaced session: its jobs stop; its clients close on their own loop."""
        if self._main_loop is not None and running_loop() is not self._main_loop:
            if session.has_jobs:
                session.jobs.close()
            self._main_loop.call_soon_threadsafe(lambda: self.front.track(asyncio.ensure_future(session.close())))
            return
        try:
            await asyncio.wait_for(session.close(), timeout=15)
        except Exception as exc:  # the new session is in place; say why the old one lingered
            self._show_note(f"The previous session did not close cleanly: {exc}")

    # ----- rendering helpers -----------------------------------------------------------------------
    def _show_note(self, text: str) -> None:
        from crystal_kernel.jupyter.render import IPythonOutput, Renderer

        Renderer(IPythonOutput()).show_note(text)

    def _show_status(self, lines: list[str]) -> None:
        from crystal_kernel.jupyter.cards import status_bundle
        from crystal_kernel.jupyter.render import IPythonOutput, status_of

        status = status_of(self.ensure_session())
        text = "\n".join([*lines, status.text()])
        bundle = status_bundle(status)
        bundle["text/plain"] = text
        IPythonOutput().show(bundle)

    async def _commands(self, lines: list[str]) -> None:
        from crystal_kernel.host.commands import HELP
        from crystal_kernel.jupyter.cell_commands import run_line
        from crystal_kernel.jupyter.render import IPythonOutput

        for line in lines:
            if line.split()[0] == "/help":
                IPythonOutput().show({"text/plain": HELP + "\n" + MAGICS_HELP})
                continue
            # No blanket refusal during a turn: listing always works (PA-8, FL-1, FL-2);
            # each command refuses its own changes while the session is busy.
            await run_line(self.front, line)

    # ----- turns --------------------------------------------------------------------------------------
    async def _turn_run(self, text: str, notes: list[str], interactive: bool) -> TurnOutcome:
        session = self.ensure_session()
        self._refuse_if_busy()

        def track(turn: Turn | None) -> None:
            self._turn = turn
            if turn is not None:
                self._turn_loop = asyncio.get_running_loop()

        try:
            return await run_notebook_turn(
                session, text, notes=notes, interactive=interactive, ask_timeout=self.options.ask_timeout,
                log=getattr(getattr(self.shell, "kernel", None), "log", None), trust_cards=None, track=track,
                stopped=lambda: self._stop_requested)
        finally:
            self.front.remember()

    def _cancel_turn(self) -> None:
        """The person's Stop, on the turn's loop. It holds until the turn has ended
        (standing_stop.py: one cancel can be absorbed on Python 3.11)."""
        self._stop_requested = True
        turn = self._turn
        if turn is not None:  # None: not started yet; it sees _stop_requested and does not start
            self._stop.cancel(turn, lambda: self._turn)

    @contextmanager
    def _sigint_cancels(self) -> Iterator[None]:
        """While an async turn runs, SIGINT (the stop button) cancels it; user code the
        python tool runs synchronously gets a KeyboardInterrupt as in a normal cell."""
        from crystal_kernel.jupyter.notebook_tools import sigint_cancels, sync_code_running

        with sigint_cancels(asyncio.get_running_loop(), self._cancel_turn, sync_code_running):
            yield

    def skipped_in_notebook_run(self) -> bool:
        """A notebook the agent runs with notebook_run runs headless in a fresh kernel: its
        %%crystal cells would start agent turns of their own (and bill a model) there, so
        they are skipped with a note."""
        if not os.environ.get(NOTEBOOK_RUN_ENV):
            return False
        self._show_note("Skipped: Crystal turns do not run inside notebook_run (a headless run started by the agent).")
        return True

    def _interactive(self) -> tuple[bool, str | None]:
        if self.options.unattended:
            return False, None
        if self.no_widgets is None:
            return True, None
        if self._told_no_widgets:
            return False, None
        self._told_no_widgets = True
        return False, (f"{self.no_widgets}: questions are unavailable and calls that need approval are denied.")

    # ----- the async form ------------------------------------------------------------------------------
    async def run_async(self, line: str, body: str | None) -> None:
        self._main_loop = asyncio.get_running_loop()
        self._stop_requested = False
        self._turn_loop = None
        try:
            opened = self.open_cell(line, body)
            if opened is None:
                return None
            opts, cell, prompt, notes = opened
            shown = await self.apply(opts)
            if cell.what == "commands":
                await self._commands(list(cell.commands))
                return None
            if cell.what == "status":
                self._show_status(shown)
                return None
        except UserError as exc:
            raise UsageError(str(exc)) from None
        interactive, why = self._interactive()
        with self._sigint_cancels():
            from crystal_kernel.jupyter.live_outputs import running_cell

            with running_cell():  # a page reloaded mid-turn gets the cell back (FORM-2)
                outcome = await self._turn_run(prompt, [*shown, *([why] if why else []), *notes], interactive)
        raise_for(outcome)
        return None

    def close(self) -> None:
        """Stop the session's jobs (unloading the extension)."""
        self.front.cancel_background()
        if self.crystal is not None and self.crystal.has_jobs:
            self.crystal.jobs.close()


@magics_class
class CrystalMagics(Magics):
    """The ``%crystal`` / ``%%crystal`` magic. Called directly (not rewritten by the
    transformer), it is the synchronous form."""

    def __init__(self, shell: Any, host: MagicsHost):
        super().__init__(shell)
        self.host = host

    @no_var_expand
    @line_cell_magic
    def crystal(self, line: str, cell: str | None = None) -> str | None:
        """Ask the Crystal agent (see ``%crystal /help``)."""
        return self.host.run_sync(line, cell)


def host_of(shell: Any) -> MagicsHost:
    magics = shell.magics_manager.registry.get("CrystalMagics")
    if magics is None:
        raise UsageError("Crystal is not loaded: run %load_ext crystal_kernel first.")
    host: MagicsHost = magics.host
    return host


async def run_magic_async(shell: Any, kind: str, line: str, body: str | None = None) -> None:
    """What the transformer's ``await`` calls (``kind`` is "line" or "cell")."""
    await host_of(shell).run_async(line, body if kind == "cell" else None)


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext crystal_kernel``."""
    from crystal_kernel.jupyter import magics_transform

    try:
        host = MagicsHost(shell)
    except UserError as exc:
        raise UsageError(str(exc)) from None
    shell.register_magics(CrystalMagics(shell, host))
    magics_transform.install(shell)
    from crystal_kernel.jupyter.notebook_tools import track_cell_errors

    track_cell_errors(shell)  # cell_output {}: the newer of the last Out[n] and the last error
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:  # typing into a form arrives whole (comm_status.py)
        from crystal_kernel.jupyter.comm_status import announce_concurrent_comms

        announce_concurrent_comms(kernel)
        from crystal_kernel.jupyter.live_outputs import register_comm_target

        register_comm_target(kernel)  # reload and restart: the lab extension asks what is live
        from crystal_kernel.jupyter import sidebar_comm

        sidebar_comm.register_comm_target(kernel)  # "Fix with Crystal" reaches this session (NB-3)
        from crystal_kernel.jupyter.front_ends import watch

        # Loaded after the front end connected: this request says whether a notebook
        # front sent it (front_ends.py); a headless run's form ends quickly.
        watch(kernel, late=True)


def unload_ipython_extension(shell: Any) -> None:
    """``%unload_ext crystal_kernel``: the magic and the transformer go; jobs stop."""
    from crystal_kernel.jupyter import magics_transform

    magics_transform.uninstall(shell)
    magics = shell.magics_manager.registry.pop("CrystalMagics", None)
    for kind in ("line", "cell"):
        shell.magics_manager.magics[kind].pop("crystal", None)
    if magics is not None:
        magics.host.close()
