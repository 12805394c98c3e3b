"""``crystal`` with no subcommand: an interactive session in the terminal (SPEC §13 Fronts).

The same front door as every front (host/bootstrap.py ``open_session``), the same slash
command dispatcher as the kernel (host/commands.py) and the same renderer as ``crystal
run`` (cli/printer.py ``TurnPrinter``). Keys: Enter sends; Esc then Enter (or a line
ending in a backslash) starts a new line; Tab completes slash commands, their arguments
(prompt set and attachment names, job ids) and ``@file`` mentions, which attach the file
as in a notebook cell; long tool output is folded (``/expand N`` shows it); Ctrl-C clears
the line, or on an empty line arms exit (a second Ctrl-C exits); Ctrl-D exits. During a
turn Ctrl-C cancels it (its running commands are killed). With stdin not a terminal it
behaves like ``crystal run -``: the prompt is read from stdin, one turn, then exit.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from typing_extensions import assert_never

from crystal_kernel.cli import cmd_run
from crystal_kernel.cli.folds import COMMAND as EXPAND
from crystal_kernel.cli.folds import OutputFolds
from crystal_kernel.cli.printer import TurnPrinter
from crystal_kernel.cli.terminal import say
from crystal_kernel.cli.terminal_person import TerminalPerson
from crystal_kernel.cli.visible_input import VisibleControls
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.gc_pause import end_front_start
from crystal_kernel.core.ops import UserTurn
from crystal_kernel.core.textsafe import terminal_safe
from crystal_kernel.host import command_results as answers
from crystal_kernel.host.bootstrap import (
    SessionOptions,
    open_session,
)
from crystal_kernel.host.commands import is_command, run_command, submit
from crystal_kernel.host.completion import complete, session_sources
from crystal_kernel.host.flags import (
    add_model_flags,
    add_process_flags,
    add_reasoning_flag,
    add_session_flags,
    flags_from_args,
    overrides_from_args,
)
from crystal_kernel.host.mentions import attach_mentions
from crystal_kernel.jobs.commands import follow_logs

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

PROMPT = "› "
WELCOME = ("Crystal {version} — {provider}:{model}, session {id} in {workspace}. /help lists the commands; "
           "/model changes the model; Esc Enter (or a "
           "trailing \\) for a new line; Ctrl-C interrupts a turn; Ctrl-D exits.")
EXIT_HINT = "(press Ctrl-C again or Ctrl-D to exit)"


def add_interactive_args(parser: argparse.ArgumentParser) -> None:
    """The flags of ``crystal`` itself: those of ``crystal run`` that make sense for a session."""
    parser.add_argument("--workspace", default=".", metavar="DIR", help="the workspace root (default: .)")
    add_session_flags(parser)
    add_model_flags(parser)
    add_reasoning_flag(parser)
    add_process_flags(parser)


class SessionCompleter(Completer):
    """Tab completion, the kernel's own (host/completion.py): slash commands and their
    arguments (job ids, prompt set and attachment names), ``@file`` mentions; and this
    front's ``/expand``."""

    def __init__(self, current: Callable[[], Session]) -> None:
        self.current = current  # the session now (/resume and /fork replace it)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        session = self.current()
        cursor = document.cursor_position
        reply = complete(document.text, cursor, session.workspace, **session_sources(session))
        matches = list(reply["matches"])
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before and EXPAND.startswith(before):
            matches.append(EXPAND)
        for match in matches:
            # The menu shows a file name's invisible characters as escapes (TRUST-6).
            yield Completion(match, start_position=reply["cursor_start"] - cursor if match != EXPAND else -len(before),
                             display=terminal_safe(match, exact=True))


def prompt_keys() -> KeyBindings:
    """Enter sends (a trailing backslash continues the line), Esc Enter adds a new line,
    Ctrl-C clears a line with text and exits the prompt (KeyboardInterrupt) on an empty one."""
    keys = KeyBindings()

    @keys.add("enter", eager=True)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text.endswith("\\") and buffer.cursor_position == len(buffer.text):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


def cmd_interactive(ns: argparse.Namespace) -> int:
    """Run ``crystal``: a session in the terminal, or one turn from a piped stdin."""
    if not sys.stdin.isatty():
        ns.prompt, ns.format = "-", "text"
        return int(cmd_run(ns))
    session = open_session(SessionOptions(
        ns.workspace, overrides=overrides_from_args(ns), flags=flags_from_args(ns), resume=ns.resume,
        session_id=ns.session,
    ))
    end_front_start()  # main() paused the collector for the start's imports
    return asyncio.run(Repl(session).run())


class Repl:
    """The prompt loop: each line is a slash command or a turn."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.folds = OutputFolds()
        self.printer = TurnPrinter("text", preview=self.folds.preview)
        # What Ctrl-C (SIGINT, while no prompt holds the keyboard) cancels now.
        self._cancel: Callable[[], None] | None = None
        history_dir = session.config.home / "history"
        try:
            history_dir.mkdir(parents=True, exist_ok=True)
            history: Any = FileHistory(str(history_dir / "terminal"))
        except OSError:
            history = None  # an unwritable Home: in-memory history
        self.prompt: PromptSession[str] = PromptSession(
            history=history, completer=SessionCompleter(lambda: self.session), key_bindings=prompt_keys(), complete_while_typing=False,
            input_processors=[VisibleControls()],  # a completed file name's bidi controls drawn as \u202e
        )

    async def run(self) -> int:
        from crystal_kernel import __version__

        # SIGINT comes only while no prompt holds the keyboard (a prompt reads Ctrl-C as a
        # key): it cancels the running turn or command. Prompts leave this handler alone.
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._interrupt)
        say(WELCOME.format(version=__version__, provider=self.session.provider.name,
                           model=self.session.provider.model, id=self.session.id, workspace=self.session.workspace))
        try:
            armed = False
            while True:
                try:
                    line = await self.prompt.prompt_async(PROMPT, handle_sigint=False)
                except KeyboardInterrupt:
                    if armed:
                        break
                    armed = True
                    say(EXIT_HINT)
                    continue
                except EOFError:
                    break
                armed = False
                if not line.strip():
                    continue
                if line.split()[0] == EXPAND:
                    say(self.folds.expand(line.strip()[len(EXPAND):]))
                    continue
                await self._guarded(self._command(line) if is_command(line) else self._turn(line))
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            await self._close()
        return 0

    def _interrupt(self) -> None:
        if self._cancel is not None:
            self._cancel()

    async def _guarded(self, work: Any) -> None:
        """Run one command or turn as a task Ctrl-C can cancel; its errors are one line."""
        task = asyncio.ensure_future(work)
        self._cancel = task.cancel
        try:
            await task
        except asyncio.CancelledError:
            say("(interrupted)")
        except UserError as exc:
            say(f"crystal: {exc}")
        finally:
            self._cancel = None

    async def _command(self, line: str) -> None:
        result: answers.CommandResult = await run_command(self.session, line)
        match result:
            case answers.Forked():
                await self.session.close()  # /fork: the front continues in the new session
                self.session = result.session
                self._answer(result.text)
            case answers.LogsResult():
                self._answer(result.text)
                if result.follow:
                    await self._follow(result.job_id, result.next_offset)
            case (answers.TextResult() | answers.HelpResult() | answers.JobsResult() | answers.SessionsResult()
                  | answers.UsageResult() | answers.Resumed()):
                self._answer(result.text)
            case _:
                assert_never(result)

    def _answer(self, text: str) -> None:
        """A command's answer, then the session saved (a command may have changed it)."""
        self.printer.command(text)
        self.session.save()

    async def _follow(self, job_id: str, offset: int) -> None:
        """/logs JOB --follow: new output as it arrives, until the job ends or Ctrl-C."""
        last = "\n"
        async for text in follow_logs(self.session.jobs, job_id, offset):
            say(text, end="")  # job output: made safe for the terminal (TRUST-6)
            last = text[-1:] or last
        if last != "\n":
            say()
        say(f"(job {job_id} ended)")

    async def _turn(self, text: str) -> None:
        prompt, notes = attach_mentions(self.session, text)  # @file, as in a notebook cell
        for note in notes:
            say(f"note: {note}", err=True)
        # The person's Ctrl-C during a question cancels the turn, as it does between them.
        person = TerminalPerson(self.session, interrupt=self._interrupt)
        turn = await submit(self.session, UserTurn(prompt=prompt), person=person)
        self._cancel = turn.cancel
        async for event in turn:
            self.printer.render(event)
        self.printer.end_line()
        if turn.stop_reason == "cancelled":
            say("(interrupted)")
        elif turn.stop_reason == "error":
            say(f"crystal: {turn.error}")

    async def _close(self) -> None:
        """Close the session: its jobs stop and its lock is released (turns saved it)."""
        await self.session.close()
        if self.session.store.exists(self.session.id):
            say(exit_line(self.session))


def exit_line(session: Session) -> str:
    """The last line of a session that was saved: its id and the command that goes on."""
    where = ""
    if Path(session.workspace).resolve() != Path.cwd().resolve():
        where = f" --workspace {shlex.quote(str(session.workspace))}"
    return f"Session {session.id} saved; continue it with: crystal --resume {session.id}{where}"
