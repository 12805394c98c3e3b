"""Slash commands and prompts, front-agnostic (SPEC §11): ops in, answers and events out.

A front parses what the person typed into an op (core/ops.py: ``UserTurn`` for a prompt,
:func:`parse_command` for a command line) and hands it to :func:`submit`, which matches
the op union exhaustively; :func:`run_command` does both for a command line, refusing a
command the front does not offer. A command answers a
:data:`~crystal_kernel.host.command_results.CommandResult`, which each front matches
exhaustively too; a UserError is shown as one line and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

from typing_extensions import assert_never

from crystal_kernel.core.commands import HelpResult, TextResult
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.ops import (
    COMMAND_NAMES,
    Access,
    AddAccess,
    Cd,
    Command,
    Compact,
    Fork,
    Help,
    Jobs,
    Logs,
    Op,
    PromptAttach,
    PromptSet,
    RemoveAccess,
    Resume,
    Sessions,
    SetApproval,
    SetMode,
    SetModel,
    SetReasoning,
    ShowSetting,
    Stop,
    Todos,
    Tools,
    Trust,
    Usage,
    UserTurn,
    parse_command,
    split_command,
)
from crystal_kernel.host import command_handlers as handlers
from crystal_kernel.host.command_handlers import save_preference, switch_model
from crystal_kernel.host.command_results import CommandResult
from crystal_kernel.host.folders import add_folder

if TYPE_CHECKING:
    from crystal_kernel.core.interaction import Interaction
    from crystal_kernel.host.loop import Turn
    from crystal_kernel.host.session import Session

__all__ = ["FRONTS", "HELP", "ROWS", "CommandResult", "Front", "HelpRow", "command_names", "help_result",
           "help_rows", "help_text", "is_command", "offered", "parse_command", "parse_for", "run_command", "save_preference",
           "submit", "switch_model"]

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


def help_result(front: Front = "terminal") -> HelpResult:
    """``/help`` in ``front``: the text, and the rows for fronts with their own layout."""
    rows = tuple((row.usages, row.what) for row in ROWS if front in row.fronts)
    return HelpResult(help_text(front), rows=rows)


def offered(name: str, front: Front) -> HelpRow | None:
    """The row of a command ``front`` does not offer (None: offered, or not a row's)."""
    row = next((r for r in ROWS if name in r.names()), None)
    return row if row is not None and front not in row.fronts else None


# What a notebook kernel shows for /help before its own lines (crystal_kernel/jupyter).
HELP = help_text("kernel")

def is_command(text: str) -> bool:
    """Whether ``text`` is a slash command line (else: a prompt)."""
    return text.lstrip().startswith("/")


def command_names() -> list[str]:
    """Every command name :func:`parse_command` knows (aliases too), for completion."""
    return sorted(COMMAND_NAMES)


def parse_for(line: str, front: Front) -> Command:
    """:func:`parse_command` as ``front`` offers the commands: one it does not offer is
    refused, saying why (before its words are looked at)."""
    name, _ = split_command(line)
    missing = offered(name, front)
    if missing is not None:
        raise UserError(f"/{name} is not available here" + (f": {missing.elsewhere}." if missing.elsewhere else "."))
    return parse_command(line)


async def run_command(session: Session, line: str, *, front: Front = "terminal") -> CommandResult:
    """Run one slash command line on a session, as ``front`` offers it (/help lists
    that front's commands; one it does not offer is refused, saying why)."""
    return await submit(session, parse_for(line, front), front=front)


@overload
async def submit(session: Session, op: UserTurn, *, front: Front = "terminal",
                 person: Interaction | None = None) -> Turn: ...


@overload
async def submit(session: Session, op: Command, *, front: Front = "terminal",
                 person: Interaction | None = None) -> CommandResult: ...


async def submit(session: Session, op: Op, *, front: Front = "terminal",
                 person: Interaction | None = None) -> Turn | CommandResult:
    """Run one op on ``session`` (SPEC §11): a :class:`UserTurn` starts a turn (iterate the
    returned Turn for its events; ``person`` answers its questions), a command answers.
    /help answers for ``front``. A UserError says why nothing changed."""
    match op:
        case UserTurn():
            from crystal_kernel.host.loop import run_turn  # the turn loop: imported by the first turn

            return run_turn(session, op.prompt, person)
        case Help():
            return help_result(front)
        case ShowSetting():
            return TextResult(handlers.show_setting(session, op.setting))
        case SetMode():
            session.set_mode(op.mode)
            return TextResult(f"Mode is now {session.mode}." + save_preference(session, mode=session.mode))
        case SetApproval():
            session.set_approval(op.approval)
            return TextResult(f"Approval mode is now {session.approval}."
                              + save_preference(session, approval=session.approval))
        case SetModel():
            provider_name, model = switch_model(session, op.spec)
            return TextResult(f"Model is now {session.provider.name}:{session.provider.model}."
                              + save_preference(session, provider=provider_name, model=model))
        case SetReasoning():
            return TextResult(handlers.set_reasoning(session, op.effort))
        case Cd():
            session.change_directory(op.path)
            return TextResult(f"Workspace is now {session.workspace}.")
        case Access():
            return TextResult(handlers.access_text(session))
        case AddAccess():
            handlers.refuse_access_change(session)
            rule = add_folder(session, op.path, op.mode)  # the one check of added folders (TRUST-6)
            return TextResult(f"Added {rule.path} ({rule.mode}).")
        case RemoveAccess():
            return TextResult(handlers.remove_access(session, op.path))
        case PromptSet() | PromptAttach():
            return TextResult(handlers.prompt_command(session, op))
        case Todos():
            return TextResult(handlers.todos_text(session))
        case Jobs():
            from crystal_kernel.jobs.commands import jobs_command  # jobs: imported when first used

            return jobs_command(session)
        case Logs():
            from crystal_kernel.jobs.commands import logs_command

            return logs_command(session, op.job_id, follow=op.follow)
        case Stop():
            from crystal_kernel.jobs.commands import stop_command

            return TextResult(await stop_command(session, op.job_id))
        case Compact():
            from crystal_kernel.host.compaction import compact_command

            return TextResult(await compact_command(session, op.focus))
        case Sessions():
            return handlers.sessions_result(session)
        case Resume():
            return handlers.resume(session, op.session_id)
        case Fork():
            return handlers.fork(session)
        case Usage():
            from crystal_kernel.host.usage import usage_command

            return usage_command(session)
        case Tools():
            return TextResult(await handlers.tools_text(session))
        case Trust():
            from crystal_kernel.host.trust_commands import trust_command

            return TextResult(trust_command(session, op.target))
        case _:
            assert_never(op)
