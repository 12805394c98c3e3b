"""Slash commands, front-agnostic (SPEC §11). Fronts call :func:`run_command` and render
the :class:`CommandResult`; a UserError is shown as one line and changes nothing."""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from crystal_kernel.core.commands import CommandResult
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.folders import add_folder
from crystal_kernel.host.store import UNVERIFIED_LEGEND, UNVERIFIED_MARK
from crystal_kernel.jobs.sandbox import mechanism_note

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

Handler = Callable[[Any, list[str]], "str | CommandResult | Awaitable[str | CommandResult]"]

# The fronts that run slash commands: the interactive terminal (`crystal`), a notebook
# kernel (its cells and %crystal), an ACP client, and `crystal run` given a command.
Front = Literal["terminal", "kernel", "acp", "run"]
FRONTS: frozenset[str] = frozenset({"terminal", "kernel", "acp", "run"})


@dataclass(frozen=True)
class HelpRow:
    """One row of /help: the commands' usages (an alias in parentheses), what they do,
    the fronts that offer them, and why the others do not (said when typed there)."""

    usages: tuple[str, ...]
    what: str
    fronts: frozenset[str] = FRONTS
    elsewhere: str = ""

    def names(self) -> list[str]:
        """The command names this row offers: ``/resume ID`` -> ``resume``."""
        return [usage.strip("()").split()[0].lstrip("/") for usage in self.usages]


ROWS: tuple[HelpRow, ...] = (
    HelpRow(("/help",), "this list"),
    HelpRow(("/mode plan|work",), "switch mode (the transcript stays)"),
    HelpRow(("/approval MODE",), "plan, default, edit, review, audit or full"),
    HelpRow(("/model [PROVIDER:]MODEL",), "switch the model"),
    HelpRow(("/reasoning [EFFORT]",), "none, low, medium, high or default (the provider's)"),
    HelpRow(("/cd DIR",), "change the workspace root"),
    HelpRow(("/access [add DIR [ro|rw] | remove DIR]",), "directories besides the workspace"),
    HelpRow(("/promptset [NAME]", "(/prompts)"), "list or switch prompt sets"),
    HelpRow(("/promptattach [enable|disable|up|down NAME]",), "prompt attachments"),
    HelpRow(("/todos",), "the session's todo list"),
    HelpRow(("/jobs", "/logs JOB [--follow]", "/stop JOB"), "background jobs"),
    HelpRow(("/compact",), "summarise the conversation now"),
    HelpRow(("/sessions",), "saved sessions"),
    # An ACP client owns its sessions: it opens, loads and forks them (docs/acp.md).
    HelpRow(("/resume ID", "/fork"), "continue a saved session, or a copy of this one",
            fronts=FRONTS - {"acp"}, elsewhere="open or start sessions from your client's session list"),
    HelpRow(("/usage",), "tokens (and cost) so far"),
    HelpRow(("/tools",), "the tools this session offers"),
    # Only the terminal folds long tool output (crystal_kernel/cli/folds.py).
    HelpRow(("/expand [N]",), "show folded tool output N whole (default: the last)",
            fronts=frozenset({"terminal"}), elsewhere="only the terminal folds tool output"),
    HelpRow(("/trust [list | FILE | all]",), "trust workspace MCP servers, exec sets, review prompts, cassettes"),
)
USAGE_WIDTH = 30


def help_rows(front: Front = "terminal") -> list[tuple[list[str], str]]:
    """The help's rows for ``front`` as (command usages, what they do), for fronts that
    draw their own layout (ACP's Markdown)."""
    return [(list(row.usages), row.what) for row in ROWS if front in row.fronts]


def help_text(front: Front = "terminal") -> str:
    """The help as plain-text columns: the commands ``front`` offers."""
    lines = ["Commands:"]
    for usages, what in help_rows(front):
        cell = "  ".join(usages)
        lines.append(f"{cell:<{USAGE_WIDTH}} {what}" if len(cell) < USAGE_WIDTH else f"{cell}   {what}")
    return "\n".join(lines)


def help_result(front: Front = "terminal") -> CommandResult:
    """``/help`` in ``front``: the text, and the rows for fronts with their own layout."""
    return CommandResult(help_text(front), data={"rows": help_rows(front)}, kind="help")


def offered(name: str, front: Front) -> HelpRow | None:
    """The row of a command ``front`` does not offer (None: offered, or not a row's)."""
    row = next((r for r in ROWS if name in r.names()), None)
    return row if row is not None and front not in row.fronts else None


# What a notebook kernel shows for /help before its own lines (crystal_kernel/jupyter).
HELP = help_text("kernel")

# name -> "module:function" for handlers that live beside their feature.
DELEGATED = {
    "promptset": "crystal_kernel.prompts.commands:promptset_command",
    "prompts": "crystal_kernel.prompts.commands:promptset_command",
    "promptattach": "crystal_kernel.prompts.commands:promptattach_command",
    "jobs": "crystal_kernel.jobs.commands:jobs_command",
    "logs": "crystal_kernel.jobs.commands:logs_command",
    "stop": "crystal_kernel.jobs.commands:stop_command",
    "compact": "crystal_kernel.host.compaction:compact_command",
    "usage": "crystal_kernel.host.usage:usage_command",
    "trust": "crystal_kernel.host.trust_commands:trust_command",
}


def is_command(text: str) -> bool:
    return text.lstrip().startswith("/")


def command_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(DELEGATED))


async def run_command(session: Session, line: str, *, front: Front = "terminal") -> CommandResult:
    """Run one slash command line on a session, as ``front`` offers it (/help lists
    that front's commands; one it does not offer is refused, saying why)."""
    try:
        words = shlex.split(line.strip())
    except ValueError as exc:
        raise UserError(f"Cannot parse the command: {exc}.") from None
    if not words or not words[0].startswith("/"):
        raise UserError("A command starts with '/'.")
    name, args = words[0][1:], words[1:]
    missing = offered(name, front)
    if missing is not None:
        raise UserError(f"/{name} is not available here" + (f": {missing.elsewhere}." if missing.elsewhere else "."))
    if name == "help":  # the one command whose answer depends on the front
        return help_result(front)
    handler: Any = _BUILTIN.get(name)
    if handler is None and name in DELEGATED:
        module_name, _, func = DELEGATED[name].partition(":")
        # Imported when first used (they pull in jobs, compaction): never guarded, so a
        # broken module fails loudly instead of hiding the command.
        handler = getattr(importlib.import_module(module_name), func)
    if handler is None:
        raise UserError(f"Unknown command /{name}; /help lists the commands.")
    result = handler(session, args)
    if hasattr(result, "__await__"):
        result = await result
    return result if isinstance(result, CommandResult) else CommandResult(str(result))


def _help(session: Session, args: list[str]) -> CommandResult:
    return help_result()  # run_command answers /help for its front; this keeps it in the table


def save_preference(session: Session, **changes: Any) -> str:
    """FL-5, SPEC §11: ``/model``, ``/mode``, ``/approval`` and ``/reasoning`` are a person's choices and
    stick: they are saved to config.json (atomically, unknown keys kept, the old
    ``promptSet``/``promptAttachments`` keys dropped). Process flags never are. Returns
    the sentence that says so; a file that cannot be written leaves the session change
    in place and says why."""
    config = session.config
    try:
        config.save_preferences(**changes)
    except (UserError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f" It was not saved as your default: {why.rstrip('.')}."
    return f" Saved as your default in {_shown_path(config.path)}."


def _shown_path(path: Any) -> str:
    """``~/…`` for a path under the user's home folder (shorter in notebooks)."""
    from pathlib import Path

    try:
        return "~/" + str(Path(path).relative_to(Path.home()))
    except ValueError:
        return str(path)


def _mode(session: Session, args: list[str]) -> str:
    if not args:
        return f"Mode: {session.mode}"
    session.set_mode(args[0])
    return f"Mode is now {session.mode}." + save_preference(session, mode=session.mode)


def _approval(session: Session, args: list[str]) -> str:
    if not args:
        return f"Approval: {session.approval}"
    session.set_approval(args[0])
    return f"Approval mode is now {session.approval}." + save_preference(session, approval=session.approval)


def _model(session: Session, args: list[str]) -> str:
    if not args:
        return f"Model: {session.provider.name}:{session.provider.model}"
    provider_name, model = switch_model(session, args[0])
    return (f"Model is now {session.provider.name}:{session.provider.model}."
            + save_preference(session, provider=provider_name, model=model))


def switch_model(session: Session, spec: str) -> tuple[str, str]:
    """Point the session at ``[PROVIDER:]MODEL`` (not saved); returns (provider, model).
    A provider that cannot be made (unknown name, no key) changes nothing."""
    from crystal_kernel.core.config import PROVIDERS
    from crystal_kernel.host.front_check import check_model_prefix
    from crystal_kernel.providers.registry import make_provider

    if session.busy:  # before the config is touched
        raise UserError("Cannot change the model while a turn is running.")
    provider_name, sep, model = spec.partition(":")
    if not sep or provider_name not in PROVIDERS:
        if sep:  # FL-6: a provider's name mistyped is refused, not taken as part of a model name
            check_model_prefix(provider_name, spec, session.provider.name)
        provider_name, model = session.provider.name, spec
    config = session.config
    saved = (config.provider, config.model)
    config.provider, config.model = provider_name, model
    try:
        provider = make_provider(config, workspace=session.workspace)
    except BaseException:
        config.provider, config.model = saved
        raise
    session.set_provider(provider)
    return provider_name, model


def _reasoning(session: Session, args: list[str]) -> str:
    """/reasoning [EFFORT]: show or set the reasoning effort; saved as the person's default
    like /model (``default`` saves null: the provider decides)."""
    from crystal_kernel.core.config import check_reasoning_effort

    if len(args) > 1:
        raise UserError("Usage: /reasoning [none|low|medium|high|default]")
    if not args:
        effort = session.config.reasoning_effort
        return f"Reasoning: {effort or 'default (the provider decides)'}."
    session._refuse_while_busy("change the reasoning effort")
    effort = check_reasoning_effort(args[0], "/reasoning")
    return (f"Reasoning is now {effort or 'the provider default'}."
            + save_preference(session, reasoning_effort=effort))


def _cd(session: Session, args: list[str]) -> str:
    if len(args) != 1:
        raise UserError("Usage: /cd DIR")
    session.change_directory(args[0])
    return f"Workspace is now {session.workspace}."


def _access(session: Session, args: list[str]) -> str:
    from crystal_kernel.core.errors import ToolError

    if args and session.busy:  # listing works during a turn; changes wait for its end
        raise UserError("Cannot change directory access while a turn is running.")
    if args and args[0] == "add" and len(args) in (2, 3):
        mode: Literal["ro", "rw"]
        if len(args) == 2 or args[2] == "rw":
            mode = "rw"
        elif args[2] == "ro":
            mode = "ro"
        else:
            raise UserError("Usage: /access add DIR [ro|rw]")
        rule = add_folder(session, args[1], mode)  # the one check of added folders (TRUST-6)
        return f"Added {rule.path} ({rule.mode})."
    if args and args[0] == "remove" and len(args) == 2:
        try:
            target = session.access.absolute(args[1])  # against the workspace, as add does
        except ToolError as exc:
            raise UserError(str(exc)) from None
        if not session.access.remove(target):
            raise UserError(f"'{args[1]}' is not an added directory.")
        session.refresh_system()
        return f"Removed {args[1]}."
    if args:
        raise UserError("Usage: /access [add DIR [ro|rw] | remove DIR]")
    lines = [f"Workspace: {session.workspace} (rw)"]
    lines += [f"{d.path} ({d.mode}){'' if d.granted else ', added by the client for this session only'}"
              for d in session.access.directories]
    lines.append(mechanism_note(session.config))  # SANDBOX-2: which sandbox holds tool processes to this
    return "\n".join(lines)


def _todos(session: Session, args: list[str]) -> str:
    if not session.todos:
        return "No todos."
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    return "\n".join(f"{marks[t.status]} {t.content}" for t in session.todos)


def _sessions(session: Session, args: list[str]) -> CommandResult:
    rows = session.store.list()
    if not rows:
        return CommandResult("No saved sessions in this workspace.", kind="sessions")
    lines = [f"{'*' if r.id == session.id else ' '} {r.id}  {r.updated}  turns {r.turns}  tokens {r.tokens}  "
             f"{r.title or ''}{'' if r.answered else '  (not answered: its last prompt got no reply)'}"
             f"{'' if r.signed else UNVERIFIED_MARK}"
             for r in rows]
    if not all(r.signed for r in rows):
        lines.append(UNVERIFIED_LEGEND)  # TRUST-5, TRUST-7: what the mark means, once
    return CommandResult("\n".join(lines), data={"sessions": [{**r.__dict__, "title": r.title} for r in rows]}, kind="sessions")


def _resume(session: Session, args: list[str]) -> str:
    if session.busy:
        raise UserError("Cannot resume while a turn is running.")
    target = args[0] if args else session.store.latest()
    if not target:
        raise UserError("No saved session to resume.")
    session.resume(target)
    return f"Resumed session {session.id} ({len(session.transcript)} messages)."


def _fork(session: Session, args: list[str]) -> CommandResult:
    """The front swaps to ``data["session"]``; the old session stays saved."""
    if session.busy:
        raise UserError("Cannot fork while a turn is running.")
    child = session.fork()
    return CommandResult(f"Forked session {session.id} into {child.id}; you are now in {child.id}.",
                         data={"session": child}, kind="fork")


async def _tools(session: Session, args: list[str]) -> str:
    lines = []
    for t in await session.prepare_tools():
        first = t.description.strip().splitlines()[0] if t.description.strip() else ""
        lines.append(f"{t.name:14} {first[:90]}")
        source = getattr(t, "source", None)
        if source:  # MCP tools: which server, and its state now
            lines.append(f"{'':14} from {source}: {getattr(t, 'state', '')}")
    if session.flags.disable_tool:
        lines.append("Disabled: " + ", ".join(session.flags.disable_tool))
    return "\n".join(lines)


_BUILTIN: dict[str, Handler] = {
    "help": _help, "mode": _mode, "approval": _approval, "model": _model, "reasoning": _reasoning,
    "cd": _cd, "access": _access,
    "todos": _todos, "sessions": _sessions, "resume": _resume, "fork": _fork, "tools": _tools,
}
