"""What the host's slash commands do to a session (SPEC §11), one function per op that
needs more than a line; ``host.commands.submit`` calls them. Each raises a UserError
(one line, nothing changed) when the session cannot do it now."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from crystal_kernel.core.commands import Resumed, SessionsResult
from crystal_kernel.core.errors import ToolError, UserError
from crystal_kernel.core.ops import PromptAttach, PromptSet
from crystal_kernel.host.command_results import Forked
from crystal_kernel.host.store import UNVERIFIED_LEGEND, UNVERIFIED_MARK
from crystal_kernel.jobs.sandbox import mechanism_note

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


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


def _shown_path(path: Path) -> str:
    """``~/…`` for a path under the user's home folder (shorter in notebooks)."""
    try:
        return "~/" + str(Path(path).relative_to(Path.home()))
    except ValueError:
        return str(path)


def show_setting(session: Session, setting: Literal["mode", "approval", "model", "reasoning"]) -> str:
    """``/mode``, ``/approval``, ``/model`` or ``/reasoning`` alone: the current value."""
    if setting == "mode":
        return f"Mode: {session.mode}"
    if setting == "approval":
        return f"Approval: {session.approval}"
    if setting == "model":
        return f"Model: {session.provider.name}:{session.provider.model}"
    effort = session.config.reasoning_effort
    return f"Reasoning: {effort or 'default (the provider decides)'}."


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


def set_reasoning(session: Session, value: str) -> str:
    """/reasoning EFFORT: saved as the person's default like /model (``default`` saves
    null: the provider decides)."""
    from crystal_kernel.core.config import check_reasoning_effort

    session._refuse_while_busy("change the reasoning effort")
    effort = check_reasoning_effort(value, "/reasoning")
    return (f"Reasoning is now {effort or 'the provider default'}."
            + save_preference(session, reasoning_effort=effort))


def refuse_access_change(session: Session) -> None:
    """Listing works during a turn; changes wait for its end."""
    if session.busy:
        raise UserError("Cannot change directory access while a turn is running.")


def remove_access(session: Session, path: str) -> str:
    """/access remove DIR: the folder, named as it was added, no longer reachable."""
    refuse_access_change(session)
    try:
        target = session.access.absolute(path)  # against the workspace, as add does
    except ToolError as exc:
        raise UserError(str(exc)) from None
    if not session.access.remove(target):
        raise UserError(f"'{path}' is not an added directory.")
    session.refresh_system()
    return f"Removed {path}."


def access_text(session: Session) -> str:
    """/access: the workspace, the added folders, and the sandbox that holds tools to them."""
    lines = [f"Workspace: {session.workspace} (rw)"]
    lines += [f"{d.path} ({d.mode}){'' if d.granted else ', added by the client for this session only'}"
              for d in session.access.directories]
    lines.append(mechanism_note(session.config))  # SANDBOX-2: which sandbox holds tool processes to this
    return "\n".join(lines)


def prompt_command(session: Session, op: PromptSet | PromptAttach) -> str:
    """/promptset and /promptattach, by the prompt package's own handlers."""
    from crystal_kernel.prompts.commands import promptattach_command, promptset_command

    if isinstance(op, PromptSet):
        return promptset_command(session, [] if op.name is None else [op.name])
    return promptattach_command(session, [] if op.action is None else [op.action, op.name])


def todos_text(session: Session) -> str:
    """/todos: the list with its marks."""
    if not session.todos:
        return "No todos."
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    return "\n".join(f"{marks[t.status]} {t.content}" for t in session.todos)


def sessions_result(session: Session) -> SessionsResult:
    """/sessions: this workspace's saved sessions, this one starred, unsigned ones marked."""
    rows = session.store.list()
    if not rows:
        return SessionsResult("No saved sessions in this workspace.", sessions=())
    lines = [f"{'*' if r.id == session.id else ' '} {r.id}  {r.updated}  turns {r.turns}  tokens {r.tokens}  "
             f"{r.title or ''}{'' if r.answered else '  (not answered: its last prompt got no reply)'}"
             f"{'' if r.signed else UNVERIFIED_MARK}"
             for r in rows]
    if not all(r.signed for r in rows):
        lines.append(UNVERIFIED_LEGEND)  # TRUST-5, TRUST-7: what the mark means, once
    return SessionsResult("\n".join(lines), sessions=tuple({**r.__dict__, "title": r.title} for r in rows))


def resume(session: Session, session_id: str | None) -> Resumed:
    """/resume [ID]: continue a saved session (the latest when no id is given)."""
    if session.busy:
        raise UserError("Cannot resume while a turn is running.")
    target = session_id if session_id is not None else session.store.latest()
    if not target:
        raise UserError("No saved session to resume.")
    session.resume(target)
    return Resumed(f"Resumed session {session.id} ({len(session.transcript)} messages).", session_id=session.id)


def fork(session: Session) -> Forked:
    """/fork: the front swaps to the answer's session; the old session stays saved."""
    if session.busy:
        raise UserError("Cannot fork while a turn is running.")
    child = session.fork()
    return Forked(f"Forked session {session.id} into {child.id}; you are now in {child.id}.", session=child)


async def tools_text(session: Session) -> str:
    """/tools: one line per tool, its source and state for MCP tools, the disabled ones."""
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
