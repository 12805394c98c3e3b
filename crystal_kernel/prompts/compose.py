"""The final texts the model reads (PA-7, PH-4, MODE-7, REV-3).

Work / Plan / Review: the resolved body (PS-6), bound in one pass with host, per-call
and plugin values; for Work and Plan the disabled-tools note (MODE-7); then the mode's
enabled attachments by order, each bound with the same values (PA-6); then plugin
``on_prompt`` appends; then plugin ``rewrite_prompt``. Other named prompts are the
resolved body, bound. The workspace instruction block is the ``{{instructions_section}}``
(or raw ``{{instructions}}``) slot, which the Review prompts never receive (REV-3).

The Review texts take a workspace override or attachment only when the person trusted
that file's content (TRUST-5, ``crystal trust``): a cloned repository must not write the
reviewer's instructions. Work, Plan and the other prompts read workspace overrides as
project instructions, like AGENTS.md (docs/security.md says why).
"""

from __future__ import annotations

import re
import weakref
from dataclasses import replace
from pathlib import Path

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.trust import TrustStore, needs_content_trust
from crystal_kernel.prompts import hooks
from crystal_kernel.prompts.attachments import attachment_text, discover_attachments, enabled_in_order
from crystal_kernel.prompts.context import PromptContext, PromptSource, context_from_session
from crystal_kernel.prompts.manifest import Folder, find_prompt_file
from crystal_kernel.prompts.names import ATTACHABLE, EXTRA_SLOTS, NAMED_PROMPTS
from crystal_kernel.prompts.placeholders import Binder
from crystal_kernel.prompts.promptsets import resolve_prompt, workspace_overrides
from crystal_kernel.prompts.selection import PromptSelection, resolve_selection

# PH-4: the {{mode}} value of each named prompt (None: the session's mode).
PROMPT_MODE: dict[str, str | None] = {
    "work": "work", "plan": "plan",
    "review": "review", "review.user": "review",
    "topic": None,
    "compaction.system": "compaction", "compaction.user": "compaction",
    "image.system": "image", "image.user": "image",
}
NO_INSTRUCTIONS = ("review", "review.user")  # REV-3


def _trusted_prompt(home: Path, workspace: Path, path: Path, notes: list[str]) -> bool:
    """TRUST-5: a workspace file the reviewer would read is used only when the person
    trusted exactly this content; otherwise one note says how to trust it."""
    if not needs_content_trust(home, workspace, path):
        return True
    state = TrustStore(home).state("prompt", path)
    if not state.trusted:
        notes.append(state.note())
    return state.trusted


def reviewer_attachments(selection: PromptSelection, home: Path, workspace: Path | None,
                         notes: list[str]) -> list[Folder]:
    """The attachments whose review text the reviewer reads (TRUST-5).

    A workspace folder counts only with a review file the person trusted as it is
    (``workspace=None``: none counts). A workspace folder wins over the Home folder of
    the same name for Work and Plan (PA-4), but it never takes the person's Home review
    text away: where it shadows a Home attachment that the person enabled (or forced
    with ``--prompt-attachment``) and brings no trusted review file of its own — it is
    disabled, has no review.md, or an untrusted one — the Home folder is used."""
    if not selection.flags.attachments_on:
        return list(selection.attachments)
    own = discover_attachments(home, None, [], source="home")
    chosen = {n for n, f in own.items() if f.enabled or n in selection.flags.forced_attachments}
    out: list[Folder] = []
    for folder in selection.attachments:
        if folder.source != "workspace":
            out.append(folder)
            continue
        path = folder.file_for("review")
        if workspace is not None and path is not None and _trusted_prompt(home, workspace, path, notes):
            out.append(folder)
        elif folder.name in chosen:
            out.append(own[folder.name])
    taken = {f.name for f in out}
    # A Home attachment the workspace's folder of the same name disabled.
    out += [f for f in enabled_in_order(own) if f.name in chosen and f.name not in taken
            and f.name in selection.available and selection.available[f.name].source == "workspace"]
    return out


def disabled_tools_note(names: list[str]) -> str:
    """MODE-7: the omitted tool names and the instruction not to call them."""
    if not names:
        return ""
    listed = ", ".join(names)
    return (f"Tools disabled for this session: {listed}. They are not available: do not call "
            "them, and do not ask for them; use the tools you have or say what you cannot do.")


def compose(name: str, ctx: PromptContext, selection: PromptSelection,
            extra: dict[str, str] | None = None, notes: list[str] | None = None,
            workspace_files: bool = True) -> str:
    """Compose the named prompt for ``ctx`` under ``selection``; notes go to ``notes``.
    ``workspace_files=False`` leaves out the workspace's prompt overrides and
    attachments (the reviewer's text when they changed during the session, TRUST-3)."""
    if name not in NAMED_PROMPTS:
        raise UserError(f"Unknown prompt '{name}'; use one of: {', '.join(NAMED_PROMPTS)}.")
    notes = notes if notes is not None else []
    workspace = ctx.workspace if workspace_files else None
    if name in NO_INSTRUCTIONS and workspace is not None:
        # TRUST-5: what the reviewer reads from the workspace counts only as trusted content.
        override = find_prompt_file(workspace_overrides(workspace), name)
        if override is not None and not _trusted_prompt(ctx.home, workspace, override, notes):
            workspace = None
    resolved = resolve_prompt(name, ctx.home, workspace, selection.set_folder, notes)
    if resolved.source == "workspace override" and name not in NO_INSTRUCTIONS:
        # Read without trust like AGENTS.md, but never silently (TRUST-5): the person
        # learns that the repository, not Crystal, wrote this prompt.
        notes.append(f"The workspace's {resolved.path} replaces Crystal's built-in '{name}' prompt "
                     "(project instructions, read without trust like AGENTS.md; docs/security.md).")
    if not workspace_files:
        selection = replace(selection, attachments=reviewer_attachments(selection, ctx.home, None, notes))
    elif name in NO_INSTRUCTIONS:
        selection = replace(selection, attachments=reviewer_attachments(selection, ctx.home, ctx.workspace, notes))

    mode = PROMPT_MODE[name] or ctx.mode
    if ctx.mode != mode:  # PH-4; plugins see the same mode through the context
        ctx = replace(ctx, mode=mode)
    values = ctx.host_values()
    # PH-7: a caller's per-call slots; declared ones it leaves out bind to "". Without
    # ``extra`` (export) they stay as tokens, showing where per-call text goes.
    if extra is not None:
        for key in EXTRA_SLOTS.get(name, ()):
            value = extra.get(key)
            values[key] = "" if value is None else str(value)
    lazy = ctx.lazy_values()
    if name in NO_INSTRUCTIONS:
        values["instructions"] = values["instructions_section"] = ""
    plugin_lazy, owners = hooks.plugin_placeholders(ctx, notes)
    for key, resolver in plugin_lazy.items():
        lazy.setdefault(key, resolver)
    binder = Binder(values, lazy, notes, owners)

    text = tidy(binder.bind(resolved.text))
    if name in ("work", "plan"):
        note = disabled_tools_note(ctx.disabled_tools)
        if note:
            text = hooks.append_block(text, note + "\n")
    if name in ATTACHABLE:
        for folder in selection.attachments:
            piece = attachment_text(folder, name, notes)
            if piece is not None:
                text = hooks.append_block(text, binder.bind(piece))
        text = hooks.on_prompt(name, text, ctx, notes)
        text = hooks.rewrite_prompt(name, text, ctx, notes)
    return text


_BLANK_RUNS = re.compile(r"\n{3,}")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")


def tidy(text: str) -> str:
    """Layout only: slots bound to nothing leave no gaps. Trailing spaces on a line go,
    runs of blank lines become one, and the text ends with exactly one newline."""
    text = _BLANK_RUNS.sub("\n\n", _TRAILING_SPACE.sub("\n", text)).strip("\n")
    return text.rstrip() + "\n" if text.strip() else ""


# Notes already shown per session, so a replaced system message does not repeat them.
_shown: weakref.WeakKeyDictionary[PromptSource, set[str]] = weakref.WeakKeyDictionary()


def _emit(session: PromptSource, notes: list[str]) -> None:
    seen = _shown.setdefault(session, set())
    for text in dict.fromkeys(notes):
        if text not in seen:
            seen.add(text)
            session.note(text)


# Sessions that have composed once: their first composition is the startup check (FL-3).
_started: weakref.WeakSet[PromptSource] = weakref.WeakSet()


def session_selection(session: PromptSource, ctx: PromptContext, notes: list[str]) -> PromptSelection:
    """The session's selection. The first time for a session object, a forced name that
    is not discovered raises UserError (FL-3: it fails startup); later it is a note."""
    # A fork is made mid-process (its workspace may have changed since startup).
    startup = session not in _started and not session.forked_from
    selection = resolve_selection(ctx.home, ctx.workspace, session.flags, startup=startup)
    if startup:
        _started.add(session)
    notes.extend(selection.notes)
    return selection


def compose_system(session: PromptSource) -> str:
    """The Work or Plan system text for ``session.mode``."""
    return compose_named("plan" if session.mode == "plan" else "work", session)


def compose_named(name: str, session: PromptSource, extra: dict[str, str] | None = None,
                  workspace_files: bool = True) -> str:
    """Any named prompt for a session, with the PH-7 per-call slots in ``extra``."""
    notes: list[str] = []
    ctx = context_from_session(session)
    selection = session_selection(session, ctx, notes)
    text = compose(name, ctx, selection, extra, notes, workspace_files)
    _emit(session, notes)
    return text
