"""The ``crystal`` command (SPEC §11).

Every command refuses bad input with a one-line English error on stderr and exit code 2,
and changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import importlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from crystal_kernel import __version__
from crystal_kernel.cli.terminal import say
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.gc_pause import end_front_start, pause_front_start

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    #: The arguments being parsed (the suggestion looks up the subcommand they name).
    _argv: Sequence[str] = ()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        if namespace is None:  # argparse's overloads: a new namespace is never None
            return super().parse_known_args(args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        from crystal_kernel.core.textsafe import terminal_safe

        message += suggestion(self, message)
        self.exit(EXIT_USAGE, terminal_safe(f"crystal: {message}") + "\n")  # it quotes the arguments (TRUST-6)


def suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """FL-6: `` (did you mean X?)`` for argparse's two typo errors: an unrecognized flag
    (the close flag of the command it was given to) and an invalid choice."""
    import re

    from crystal_kernel.host.front_check import did_you_mean

    choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
    if choice:
        return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
    unknown = re.match(r"unrecognized arguments: (\S+)", message)
    if not unknown or not unknown.group(1).startswith("--"):
        return ""
    flag = unknown.group(1).split("=", 1)[0]
    return did_you_mean(flag, _flags_of(parser, getattr(parser, "_argv", ())))


def _flags_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """The long flags of ``parser`` and of the subcommand ``argv`` names, if any."""
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((action.choices[w] for w in argv if w in action.choices), None)
            if chosen is not None:
                flags += _flags_of(chosen, ())
    return flags


# Subcommand groups: module exposing add_subparsers(sub). The jupyter and acp fronts keep
# their own beside their code.
SUBCOMMAND_MODULES = (
    "crystal_kernel.cli.tools",
    "crystal_kernel.cli.prompts",
    "crystal_kernel.jupyter.cli",
    "crystal_kernel.jupyter.space",
    "crystal_kernel.acp.cli",
    "crystal_kernel.host.trust_commands",
)


def build_parser(run_only: bool = False) -> argparse.ArgumentParser:
    """The ``crystal`` parser; ``run_only`` leaves out every subcommand but ``run`` (what
    ``crystal run`` itself parses: the others' modules and parsers cost its start ~6 ms)."""
    from crystal_kernel.host.flags import add_model_flags, add_process_flags, add_reasoning_flag, add_session_flags

    parser = OneLineParser(prog="crystal", description="Crystal: a coding agent that lives in Jupyter.")
    parser.add_argument("--version", action="version", version=f"crystal {__version__}",
                        help="print the version and exit")
    parser.epilog = "With no command, crystal starts an interactive session in the terminal (crystal --help-session)."
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser, required=True)
    run = sub.add_parser(
        "run", help="run one headless turn",
        description="One headless turn: the model may call many tools. Nobody is there to answer, so the "
                    "question tool is not offered and calls that would ask for approval are denied; choose "
                    "--approval edit or full for a run that changes files or runs commands.")
    run.add_argument("prompt", nargs="?", help="the prompt, a /command, or - to read it from stdin")
    run.add_argument("--workspace", default=".", metavar="DIR", help="the workspace root (default: .)")
    add_model_flags(run)
    add_reasoning_flag(run)
    run.add_argument("--format", choices=("text", "jsonl"), default="text",
                     help="text: the answer on stdout, tool activity on stderr; jsonl: one JSON event per line "
                          "(default: text)")
    add_session_flags(run)
    add_process_flags(run)
    run.set_defaults(handler=cmd_run)
    for module_name in () if run_only else SUBCOMMAND_MODULES:
        module = importlib.import_module(module_name)  # unguarded: a broken front fails loudly
        module.add_subparsers(sub)
    return parser


def starts_interactive(args: Sequence[str]) -> bool:
    """``crystal`` alone, or with only flags (``crystal --model M``), is the interactive front."""
    return not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"))


def build_interactive_parser() -> argparse.ArgumentParser:
    """``crystal [flags]``: the interactive session (cli/interactive.py)."""
    from crystal_kernel.cli.interactive import add_interactive_args, cmd_interactive

    parser = OneLineParser(
        prog="crystal", description="An interactive Crystal session in the terminal: Enter sends, Esc Enter or a "
        "trailing backslash starts a new line, /help lists the commands, Ctrl-C interrupts a turn, Ctrl-D exits. "
        "With stdin not a terminal, one turn like crystal run -. Other commands: crystal --help.")
    parser.add_argument("--help-session", action="help", help="show this help and exit")
    add_interactive_args(parser)
    parser.set_defaults(handler=cmd_interactive)
    return parser


# The SDKs define an optional aiohttp transport whenever aiohttp is installed, which
# imports aiohttp on every start (measured here: ~85 ms of openai's import, ~190 ms of
# anthropic's). Crystal always uses the SDKs' default httpx transport, so its own-process
# fronts (OWN_PROCESS_COMMANDS, the interactive crystal) mark those modules as absent: the SDK then defines a stub that is never used.
# Likewise ``h2``: the HTTP clients import their HTTP/2 connection whenever h2 is
# installed (~10 ms of crystal run's start), and define a stub without it; nothing here
# asks for HTTP/2 (every client is made with http2 off, the default).
_UNUSED_SDK_MODULES = ("openai._vendor.httpx_aiohttp", "anthropic._vendor.httpx_aiohttp", "h2")


def skip_unused_sdk_modules() -> None:
    """Keep the SDKs from importing their optional aiohttp transport in this process.
    Only for processes that run no one else's code (the own-process fronts)."""
    for name in _UNUSED_SDK_MODULES:
        if name.split(".")[0] not in sys.modules:  # never change an SDK already loaded
            # None in sys.modules makes an import fail at once (the import system's
            # documented block); typeshed types the values as modules only.
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]


#: The fronts that open sessions: their flags and settings are checked alike, first (FL-6).
CHECKED_FRONTS = ("run", "space", "acp")
#: The fronts whose process runs no one else's code: no notebook, no Jupyter server.
OWN_PROCESS_COMMANDS = ("run", "acp", "tools")
#: jsonschema, which the MCP SDK imports, builds rfc3987-syntax's Earley grammar for its
#: optional "iri" format check as it is imported: ~1.2 s of CPU before an MCP server's
#: first catalog. Nothing in these fronts checks formats (the SDK validates without a
#: format checker), and jsonschema leaves the check out when the module is absent.
_UNUSED_FORMAT_MODULES = (("rfc3987_syntax", "jsonschema"),)


def skip_unused_format_grammar() -> None:
    """Keep jsonschema from building a grammar nothing here uses. Only for processes that
    run no one else's code (a kernel's person may check "iri" formats themselves)."""
    for name, user in _UNUSED_FORMAT_MODULES:
        if name not in sys.modules and user not in sys.modules:  # never change what is loaded
            sys.modules[name] = None  # type: ignore[assignment]  # the import system's documented block


def skip_empty_pydantic_plugin_scan() -> None:
    """pydantic looks for its plugins (the ``pydantic`` entry-point group) when it builds
    the first model, through ``importlib.metadata`` (~10 ms of ``crystal run``'s start);
    when no installed distribution declares that group, say so up front (the scan's own
    result for none). Only for processes that run no one else's code (the own-process fronts)."""
    from crystal_kernel.plugins import declares_entry_points

    if declares_entry_points("pydantic"):
        return
    from pydantic.plugin import _loader

    if getattr(_loader, "_plugins", {}) is None:  # not scanned yet (a private name: checked)
        _loader._plugins = {}


def console() -> NoReturn:
    """The ``crystal`` console script (and ``python -m crystal_kernel.cli``): :func:`main`,
    then the process ends with its code; `crystal run` ends it at once (:func:`exit_at_once`).
    main() itself returns, for a process that goes on (a test, an embedding program)."""
    code = main()
    if sys.argv[1:2] == ["run"]:
        exit_at_once(code)
    sys.exit(code)


def exit_at_once(code: int) -> NoReturn:
    """End this process now, with ``code``, as Python's own exit does minus the
    interpreter's teardown: other threads are waited for, atexit handlers run, stdout and
    stderr are flushed (exit code 120 when stdout cannot be, as Python does). The teardown
    frees every one of the ~600 modules a run has loaded, one object at a time, which the
    system does at once when the process ends: 20-40 ms between a run's last output and
    its exit (docs/benchmarks.md, "Fewer imports, a shorter exit"). Only for `crystal run` itself: everything it
    wrote is closed by then (the session journal saved and fsynced) and its session's
    jobs and servers are stopped."""
    # What the interpreter's exit runs first: the thread module's own exit hooks (an idle
    # thread pool's workers are told to end: joined without them, they wait forever),
    # then it waits for every thread that is not a daemon. A private name: without it,
    # the ordinary exit.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        code = code or 120
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    paused = argv is None and args[:1] == ["run"] and gc.isenabled()
    if paused:  # this process is `crystal run` itself
        # Importing the host and the SDK allocates hundreds of thousands of objects that
        # live as long as the process; the collector would walk them again and again
        # (~15% of the CPU time to the first request). cmd_run freezes them and turns it
        # back on once the session is open.
        gc.disable()
    if argv is None and (starts_interactive(args) or args[:1] in (["acp"], ["tools"])):
        # `crystal acp`, `tools` and the interactive crystal themselves: paused as run is,
        # until the start's imports are done (acp: flags checked; tools: tools found;
        # interactive: session open).
        pause_front_start()
    if argv is None and (starts_interactive(args) or args[:1] and args[0] in OWN_PROCESS_COMMANDS):
        # This process is a front of its own (run, acp, tools, the interactive crystal):
        # what it imports is Crystal's alone. `crystal acp` and the interactive front
        # open sessions as `crystal run` does; with the openai SDK's package inits
        # deferred, each start imports ~0.7 s of CPU less (every openai type).
        skip_unused_format_grammar()
        skip_unused_sdk_modules()
        skip_empty_pydantic_plugin_scan()
        from crystal_kernel.providers.deferred_init import defer_package_inits

        defer_package_inits()
    if argv is None:
        # A library's log record (the MCP SDK's, quoting a server's message) is printed
        # with its control characters made visible, like everything else here (TRUST-6).
        from crystal_kernel.core.textsafe import log_to_terminal

        log_to_terminal()
    try:
        parser = build_interactive_parser() if starts_interactive(args) else build_parser(run_only=args[:1] == ["run"])
        ns = parser.parse_args(args)
        try:
            if starts_interactive(args) or ns.command in CHECKED_FRONTS:
                from crystal_kernel.host.front_check import check_front

                check_front(ns)  # FL-6: before anything starts or is written
            result = ns.handler(ns)
            return int(result or 0)
        except UserError as exc:
            say(f"crystal: {exc}", err=True)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
    finally:
        if paused:  # a run that ended before its session opened (a usage error) gives it back too
            gc.enable()
        end_front_start()  # likewise for a front that refused its flags


def cmd_run(ns: argparse.Namespace) -> int:
    from crystal_kernel.host.bootstrap import SessionOptions, open_session
    from crystal_kernel.host.flags import flags_from_args, overrides_from_args

    prompt = ns.prompt
    if prompt is None:
        raise UserError("A prompt is required (or - to read it from stdin).")
    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise UserError("The prompt is empty.")
    session = open_session(SessionOptions(
        ns.workspace, overrides=overrides_from_args(ns), flags=flags_from_args(ns),
        resume=ns.resume, session_id=ns.session, person_present=False,
    ))
    # The SDKs' modules and models loaded by now live as long as the process: out of the
    # collector's sight, the collections during the turn and the one at exit skip them
    # (that last one alone took seconds after Ctrl-C on a loaded machine). main() turned
    # the collector off for the start; the turn runs with it on.
    gc.freeze()
    gc.enable()
    return asyncio.run(_run_turn(session, prompt, ns.format))


async def _run_turn(session: Session, prompt: str, fmt: str) -> int:
    from crystal_kernel.cli.printer import TurnPrinter
    from crystal_kernel.host.loop import run_turn
    from crystal_kernel.host.mentions import attach_mentions

    out = TurnPrinter(fmt)
    try:
        # A command line (host.commands.is_command's test: a leading "/"). host.commands,
        # every command's handlers and option models, is imported only for one: a prompt's
        # first request does not wait for it (~10 ms of crystal run's start).
        if prompt.lstrip().startswith("/"):
            from crystal_kernel.host.commands import run_command

            result = await run_command(session, prompt, front="run")
            out.command(result.text)
            session.save()
            return 0
        # @file mentions attach the file, as in a notebook cell and the interactive front.
        attached, notes = attach_mentions(session, prompt)
        for note in notes:
            say(f"crystal: note: {note}", err=True)
        turn = run_turn(session, attached)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, turn.cancel)
        loop.add_signal_handler(signal.SIGTERM, turn.cancel)
        reader_gone = False
        async for event in turn:
            if reader_gone:
                continue  # the cancelled turn winds down (its journal is saved), unseen
            try:
                out.render(event)
            except BrokenPipeError:
                # Whoever read the output went away (`crystal run … | head -1`): the turn
                # stops as at Ctrl-C, and nothing more is written (SIGPIPE's quiet end).
                reader_gone = True
                _stdout_to_devnull()
                turn.cancel()
        if reader_gone:
            return EXIT_READER_GONE
        if turn.stop_reason == "error":
            # The model service failed (or a bug): one line on stderr, exit 2 (SPEC §11).
            say(f"crystal: {turn.error}", err=True)
            return EXIT_USAGE
        code = {"end_turn": 0, "max_steps": 0, "cancelled": 130}.get(turn.stop_reason or "", 1)
        if code == 1 and fmt == "text":
            # jsonl says it in turn_end; text mode must not exit 1 without a word.
            say(f"crystal: {stop_explanation(turn.stop_reason, session)}", err=True)
        if fmt == "text" and session.store.exists(session.id):
            # jsonl has the id in turn_end; stdout stays the answer alone.
            say(resume_hint(session), err=True)
        return code
    finally:
        await session.close()


#: `crystal run`'s exit code when its output's reader went away: a shell's code for a
#: command that SIGPIPE ended (128 + 13), without the traceback.
EXIT_READER_GONE = 141


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null: what Python still flushes at exit finds no closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def resume_hint(session: Session) -> str:
    """The line after a text-mode turn: the session's id and the command that goes on."""
    where = ""
    if Path(session.workspace).resolve() != Path.cwd().resolve():
        where = f" --workspace {shlex.quote(str(session.workspace))}"
    return f"Session {session.id} saved; continue it with: crystal run --resume {session.id}{where} \"…\""


def stop_explanation(reason: str | None, session: Session) -> str:
    """One line saying why a turn ended early."""
    if reason in ("max_tokens", "length", "max_output_tokens"):
        limit = getattr(session.config, "max_output_tokens", None)
        return (f"the answer was cut off at the output limit (maxOutputTokens {limit}); raise maxOutputTokens "
                "in config.json or ask for a shorter answer.")
    if reason in ("content_filter", "refusal"):
        return f"the model server stopped the answer ({reason})."
    return f"the turn ended early (stop reason: {reason})."
