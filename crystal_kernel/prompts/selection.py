"""Which prompt set and which attachments a process uses (PS-5, PS-8, PA-5, FL-1 … FL-5).

The selection is read from the manifests on disk each time a system message is
composed, so a switch, a hand edit, a resume or a fork always sees the enabled manifest
(PS-8). Process flags force a set or attachments for the process and never write
anything (FL-5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.attachments import discover_attachments, enabled_in_order
from crystal_kernel.prompts.manifest import Folder
from crystal_kernel.prompts.names import DEFAULT_SET, folder_name_problem
from crystal_kernel.prompts.promptsets import discover_sets, enabled_set, sets_root


@dataclass
class PromptFlags:
    """The prompt part of the process flags, normalised."""

    prompt_set: str | None = None
    attachments_on: bool = True
    forced_attachments: list[str] = field(default_factory=list)

    @classmethod
    def from_flags(cls, flags: Any) -> PromptFlags:
        """Read a ProcessFlags-like object (attributes prompt_set, prompt_attachments,
        prompt_attachment); UserError for bad values (FL-2, FL-3)."""
        if flags is None:
            return cls()
        if isinstance(flags, PromptFlags):
            return flags
        prompt_set = getattr(flags, "prompt_set", None) or None
        switch = getattr(flags, "prompt_attachments", None) or "on"
        if switch not in ("on", "off"):
            raise UserError(f"--prompt-attachments must be on or off, not '{switch}'.")
        forced: list[str] = []
        for name in getattr(flags, "prompt_attachment", None) or []:
            problem = folder_name_problem(name)
            if problem:
                raise UserError(f"--prompt-attachment: {problem}")
            if name not in forced:  # FL-3: kept once, first-seen order
                forced.append(name)
        if switch == "off" and forced:
            raise UserError("--prompt-attachment cannot be combined with --prompt-attachments off.")
        if prompt_set is not None and prompt_set != DEFAULT_SET:
            problem = folder_name_problem(prompt_set)
            if problem:
                raise UserError(f"--prompt-set: {problem}")
        return cls(prompt_set=prompt_set, attachments_on=switch == "on", forced_attachments=forced)


@dataclass
class PromptSelection:
    """The effective prompt set and attachments, with English notes."""

    flags: PromptFlags
    sets: dict[str, Folder]
    set_name: str | None              # None: the built-in prompts
    set_reason: str                   # "forced", "enabled" or "default"
    available: dict[str, Folder]      # every discovered attachment (winning folders)
    attachments: list[Folder]         # the effective attachments, in order
    notes: list[str] = field(default_factory=list)

    @property
    def set_folder(self) -> Folder | None:
        return self.sets.get(self.set_name) if self.set_name else None

    @property
    def forced(self) -> list[str]:
        return list(self.flags.forced_attachments)

    @property
    def set_label(self) -> str:
        """The status-line label: the selected set's folder name, or ``default`` (PA-8)."""
        return self.set_name or DEFAULT_SET


def resolve_selection(home: Path, workspace: Path | None, flags: Any = None, *,
                      startup: bool = False) -> PromptSelection:
    """Resolve the selection from disk and the process flags.

    With ``startup=True`` a forced set or forced attachment that is not discovered raises
    UserError (FL-3: it fails startup); later (after ``/cd``) it is skipped with a note.
    """
    pflags = PromptFlags.from_flags(flags)
    notes: list[str] = []
    sets = discover_sets(home, notes)

    set_name: str | None
    if pflags.prompt_set is not None:
        reason = "forced"
        if pflags.prompt_set == DEFAULT_SET:
            set_name = None
        elif pflags.prompt_set in sets:
            set_name = pflags.prompt_set
        else:
            message = (f"--prompt-set '{pflags.prompt_set}' is not a usable prompt set in "
                       f"{sets_root(home)}.")
            if startup:
                raise UserError(message)
            notes.append(message + " Using the built-in prompts.")
            set_name = None
    else:
        set_name = enabled_set(sets, notes)
        reason = "enabled" if set_name else "default"

    available = discover_attachments(home, workspace, notes)
    attachments: list[Folder] = []
    if pflags.attachments_on:
        attachments = enabled_in_order(available)
        for name in pflags.forced_attachments:
            folder = available.get(name)
            if folder is None:
                message = f"--prompt-attachment '{name}' is not a prompt attachment in Home or the workspace"
                if startup:
                    raise UserError(message + ".")
                notes.append(message + "; skipped.")
            elif folder not in attachments:  # FL-3: an enabled name keeps its place
                attachments.append(folder)
    return PromptSelection(pflags, sets, set_name, reason, available, attachments, notes)


def check_prompt_flags(home: Path, workspace: Path, flags: Any) -> PromptSelection:
    """FL-1 … FL-3 at process start: raise UserError when the prompt flags cannot work."""
    return resolve_selection(home, workspace, flags, startup=True)
