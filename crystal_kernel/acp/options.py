"""What an ACP client can switch and call: session modes (Plan, Work), the config
options ``mode`` and ``approval``, and the slash commands offered as ACP commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp.schema import AvailableCommand, SessionConfigOptionSelect, SessionMode, SessionModeState

from crystal_kernel.core.config import APPROVAL_MODES

if TYPE_CHECKING:
    from acp.schema import SessionConfigOptionBoolean

    from crystal_kernel.host.session import Session

    # What the SDK's responses and updates take (a list is invariant: a list of selects
    # alone would not do under pydantic's typed __init__).
    ConfigOptions = list[SessionConfigOptionSelect | SessionConfigOptionBoolean]

MODES = {
    "plan": ("Plan", "Read and search only; write the plan as todos."),
    "work": ("Work", "Edit files and run commands, with approval."),
}
APPROVALS = {
    "plan": ("Plan", "Reads are allowed; ask before every write or command."),
    "default": ("Default", "Reads are allowed; ask before every write or command."),
    "edit": ("Edit", "Workspace edits are allowed; ask before commands and outside writes."),
    "review": ("Review", "A reviewing model allows or denies; it asks you when unsure."),
    "audit": ("Audit", "Ask before every write or command, showing the reviewer's view."),
    "full": ("Full", "Allow everything (forbidden rules still deny)."),
}
# How the slash commands this front offers are described to clients (description, input
# hint); which commands it offers is host/commands.py's ROWS (/resume and /fork belong to
# the client, /expand to the terminal). A command without an entry here is described by
# its /help row.
COMMANDS: dict[str, tuple[str, str | None]] = {
    "help": ("List the commands", None),
    "mode": ("Switch mode", "plan or work"),
    "approval": ("Set the approval mode", "plan, default, edit, review, audit or full"),
    "model": ("Switch the model", "[PROVIDER:]MODEL"),
    "reasoning": ("Set the model's reasoning effort", "none, low, medium, high or default"),
    "cd": ("Change the workspace root", "DIR"),
    "access": ("Directories besides the workspace", "[add DIR [ro|rw] | remove DIR]"),
    "promptset": ("List or switch prompt sets", "[NAME]"),
    "promptattach": ("Prompt attachments", "[enable|disable|up|down NAME]"),
    "todos": ("Show the todo list", None),
    "jobs": ("Background jobs", None),
    "logs": ("A job's output", "JOB"),
    "stop": ("Stop a background job", "JOB"),
    "compact": ("Summarise the conversation now", None),
    "sessions": ("Saved sessions", None),
    "usage": ("Tokens (and cost) so far", None),
    "tools": ("The tools this session offers", None),
    "trust": ("Trust workspace MCP servers, exec sets, review prompts, cassettes", "[list | FILE | all]"),
}


def mode_state(session: Session) -> SessionModeState:
    """ACP session modes are Crystal's product modes."""
    return SessionModeState(
        current_mode_id=session.mode,
        available_modes=[SessionMode(id=k, name=n, description=d) for k, (n, d) in MODES.items()],
    )


def _select(option_id: str, name: str, current: str, table: dict[str, tuple[str, str]],
            **extra: Any) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect.model_validate({
        "type": "select", "id": option_id, "name": name, "currentValue": current,
        "options": [{"value": k, "name": n, "description": d} for k, (n, d) in table.items()], **extra,
    })


def config_options(session: Session) -> ConfigOptions:
    """``mode`` mirrors the session mode (for clients that prefer config options);
    ``approval`` is the approval mode, which ACP session modes cannot express."""
    approvals = {k: APPROVALS.get(k, (k.title(), "")) for k in APPROVAL_MODES}
    return [
        _select("mode", "Mode", session.mode, MODES, category="mode",
                description="Plan reads and plans; Work edits and runs commands."),
        _select("approval", "Approval", session.approval, approvals,
                description="Which tool calls need your permission."),
    ]


def available_commands() -> list[AvailableCommand]:
    """The commands ACP offers, in /help's order (its aliases left out)."""
    from crystal_kernel.host.commands import ROWS

    commands: list[AvailableCommand] = []
    for row in ROWS:
        if "acp" not in row.fronts:
            continue
        for usage in row.usages:
            if usage.startswith("("):  # an alias, e.g. (/prompts)
                continue
            name, _, arguments = usage.lstrip("/").partition(" ")
            description, hint = COMMANDS.get(name, (row.what[:1].upper() + row.what[1:], arguments or None))
            commands.append(AvailableCommand.model_validate(
                {"name": name, "description": description, **({"input": {"hint": hint}} if hint else {})}))
    return commands
