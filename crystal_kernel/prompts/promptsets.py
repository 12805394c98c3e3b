"""Prompt sets (PS-1 … PS-9) and named-prompt resolution (PS-2, PS-3, PS-6).

Sets live only in Home: ``{home}/promptsets/<name>/prompt.json`` plus any subset of the
named prompt files. At most one is enabled; ``default`` is the virtual built-in
selection. Named prompts resolve, lowest to highest: built-in, selected set,
``{home}/prompts/<name>.md``, ``<workspace>/.crystal/prompts/<name>.md``. A file that is
missing or empty (whitespace only) at one level falls through to the level below.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.manifest import Folder, discover, find_prompt_file, manifest_lock, read_prompt_file
from crystal_kernel.prompts.names import DEFAULT_SET, NAMED_PROMPTS, folder_name_problem

BUILTIN_DIR = Path(__file__).with_name("builtin")


def sets_root(home: Path) -> Path:
    return Path(home) / "promptsets"


def home_overrides(home: Path) -> Path:
    return Path(home) / "prompts"


def workspace_overrides(workspace: Path) -> Path:
    return paths.workspace_prompts_dir(workspace)


@functools.cache
def builtin_text(name: str) -> str:
    """The packaged built-in text of a named prompt."""
    if name not in NAMED_PROMPTS:
        raise UserError(f"Unknown prompt '{name}'; use one of: {', '.join(NAMED_PROMPTS)}.")
    return (BUILTIN_DIR / f"{name}.md").read_text(encoding="utf-8")


def discover_sets(home: Path, notes: list[str]) -> dict[str, Folder]:
    """PS-1 / PS-4: valid set folders by name (never the workspace); skips add notes."""
    return discover(sets_root(home), "home", "prompt set", notes, reserved=(DEFAULT_SET,))


def enabled_set(sets: dict[str, Folder], notes: list[str]) -> str | None:
    """PS-5: the one enabled set; none (with a note) when two or more are enabled."""
    enabled = [name for name, folder in sets.items() if folder.enabled]
    if len(enabled) > 1:
        notes.append(f"Prompt sets {', '.join(enabled)} are all enabled; only one may be. "
                     "Using the built-in prompts until that is fixed (`crystal promptsets enable NAME`).")
        return None
    return enabled[0] if enabled else None


def require_set(home: Path, name: str) -> Folder:
    """The valid set folder called ``name``; UserError naming the problem otherwise."""
    if name == DEFAULT_SET:
        raise UserError("'default' is the built-in prompts, not a prompt set folder.")
    problem = folder_name_problem(name)
    if problem:
        raise UserError(problem)
    notes: list[str] = []
    sets = discover_sets(home, notes)
    if name not in sets:
        folder = sets_root(home) / name
        reason = next((n for n in notes if f"'{name}'" in n), None)
        if reason:
            raise UserError(reason)
        raise UserError(f"No prompt set '{name}' in {folder.parent} (a folder with {name}/prompt.json).")
    return sets[name]


def enable_set(home: Path, name: str) -> str:
    """PS-5: enable ``name`` and disable every other enabled set. Returns a summary."""
    if name == DEFAULT_SET:
        return disable_sets(home)
    with manifest_lock(sets_root(home)):
        target = require_set(home, name)
        others = [f for n, f in discover_sets(home, []).items() if n != name and f.enabled]
        target.update(enabled=True)
        for folder in others:
            folder.update(enabled=False)
    return f"Prompt set '{name}' is enabled."


def disable_sets(home: Path, name: str | None = None) -> str:
    """PS-5: clear every enabled flag (``disable`` with no name, the current set's name,
    or ``default``). A named set that is not enabled is left alone."""
    with manifest_lock(sets_root(home)):
        if name is not None and name != DEFAULT_SET:
            folder = require_set(home, name)
            if not folder.enabled:
                return f"Prompt set '{name}' is not enabled; nothing changed."
        changed = [f.name for f in discover_sets(home, []).values() if f.enabled and f.update(enabled=False)]
    if not changed:
        return "No prompt set was enabled; the built-in prompts are in use."
    return f"Disabled prompt set {', '.join(changed)}; the built-in prompts are in use."


@dataclass(frozen=True)
class ResolvedPrompt:
    """A named prompt's winning text and where it came from."""

    name: str
    text: str
    source: str          # "built-in", "prompt set", "home override", "workspace override"
    path: Path | None = None

    def describe(self) -> str:
        return self.source if self.path is None else f"{self.source} ({self.path})"


def resolve_prompt(name: str, home: Path, workspace: Path | None, set_folder: Folder | None,
                   notes: list[str]) -> ResolvedPrompt:
    """PS-6: the winning text of a named prompt."""
    if name not in NAMED_PROMPTS:
        raise UserError(f"Unknown prompt '{name}'; use one of: {', '.join(NAMED_PROMPTS)}.")
    levels: list[tuple[str, Path | None]] = []
    if workspace is not None:
        levels.append(("workspace override", find_prompt_file(workspace_overrides(workspace), name)))
    levels.append(("home override", find_prompt_file(home_overrides(home), name)))
    if set_folder is not None:
        levels.append((f"prompt set '{set_folder.name}'", set_folder.file_for(name)))
    for source, path in levels:
        text = read_prompt_file(path, notes, inside=workspace if source == "workspace override" else None)
        if text is not None:
            return ResolvedPrompt(name, text, source, path)
    return ResolvedPrompt(name, builtin_text(name), "built-in")
