"""Front-agnostic slash commands: ``/promptset`` (alias ``/prompts``) and
``/promptattach`` (PS-7, PS-8, PA-8, FL-1 … FL-4).

Each takes the session and the words after the command and returns the text to show.
Refusals raise :class:`UserError` (one English line) and change nothing. Listing always
works; changes are refused while a turn runs. After a change the active system message
is replaced (``session.refresh_system()``), which also rebuilds Review.
"""

from __future__ import annotations

from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.attachments import (
    disable_attachment,
    discover_attachments,
    enable_attachment,
    move_attachment,
)
from crystal_kernel.prompts.context import PromptContext, PromptSession, context_from_session
from crystal_kernel.prompts.manifest import Folder
from crystal_kernel.prompts.names import DEFAULT_SET
from crystal_kernel.prompts.promptsets import disable_sets, enable_set
from crystal_kernel.prompts.report import attachments_data, attachments_text, sets_data, sets_text
from crystal_kernel.prompts.selection import PromptSelection, resolve_selection

ATTACH_ACTIONS = ("enable", "disable", "up", "down")


def _selection(session: PromptSession) -> tuple[PromptContext, PromptSelection]:
    ctx = context_from_session(session)
    return ctx, resolve_selection(ctx.home, ctx.workspace, session.flags)


def _refuse_while_busy(session: PromptSession, what: str) -> None:
    if session.busy:
        raise UserError(f"Cannot {what} while a turn is running; try again when it ends.")


def promptset_command(session: PromptSession, args: list[str]) -> str:
    """``/promptset`` lists sets and the effective Work/Plan/Review sources;
    ``/promptset NAME`` (or ``default``) switches by writing prompt.json."""
    ctx, selection = _selection(session)
    if not args:
        return sets_text(sets_data(ctx.home, selection, ctx.workspace, ("work", "plan", "review")))
    if len(args) != 1:
        raise UserError("Usage: /promptset [NAME | default]")
    name = args[0]
    _refuse_while_busy(session, "switch the prompt set")
    if selection.flags.prompt_set is not None:
        raise UserError(f"The prompt set is fixed for this process by --prompt-set "
                        f"{selection.flags.prompt_set}; switching is refused and no file was changed.")
    message = disable_sets(ctx.home) if name == DEFAULT_SET else enable_set(ctx.home, name)
    session.refresh_system()
    return message


def promptattach_command(session: PromptSession, args: list[str]) -> str:
    """``/promptattach`` lists attachments; ``/promptattach enable|disable|up|down NAME``
    edits the winning folder's prompt.json (PA-9: no source prefix)."""
    ctx, selection = _selection(session)
    if not args:
        return attachments_text(attachments_data(selection))
    if len(args) != 2 or args[0] not in ATTACH_ACTIONS:
        raise UserError("Usage: /promptattach [enable|disable|up|down NAME]")
    action, name = args
    _refuse_while_busy(session, "change prompt attachments")
    if not selection.flags.attachments_on:
        raise UserError("Prompt attachments are off for this process (--prompt-attachments off); "
                        f"'{action}' is refused.")
    if name in selection.forced:
        raise UserError(f"'{name}' is forced for this process by --prompt-attachment; "
                        f"'{action}' is refused and prompt.json was not changed.")
    message = apply_attachment_action(discover_attachments(ctx.home, ctx.workspace, []), action, name)
    session.refresh_system()
    return message


def apply_attachment_action(folders: dict[str, Folder], action: str, name: str) -> str:
    """Run one enable/disable/up/down on a view of attachment folders."""
    if action == "enable":
        return enable_attachment(folders, name)
    if action == "disable":
        return disable_attachment(folders, name)
    return move_attachment(folders, name, -1 if action == "up" else 1)
