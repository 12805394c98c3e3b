"""Prompt attachments (PA-1 … PA-6, PA-9): folders whose work.md / plan.md / review.md
are appended after the bound Work, Plan or Review text.

Discovery reads ``{home}/prompt-attachments/<name>/`` and
``<workspace>/.crystal/prompt-attachments/<name>/`` (the workspace root only). For a
name in both, the workspace folder wins whole: its prompt.json decides enabled and
order. A workspace folder that is skipped (bad manifest) does not hide the Home one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.manifest import Folder, discover, manifest_lock, read_prompt_file
from crystal_kernel.prompts.names import ATTACHABLE, folder_name_problem

KIND = "prompt attachment"


def home_root(home: Path) -> Path:
    return Path(home) / "prompt-attachments"


def workspace_root(workspace: Path) -> Path:
    return paths.workspace_attachments_dir(workspace)


def discover_attachments(home: Path, workspace: Path | None, notes: list[str],
                         source: str | None = None) -> dict[str, Folder]:
    """Discovered attachments by name. ``source`` limits the view to ``home`` or
    ``workspace``; ``None`` merges them with the workspace winning (PA-4)."""
    found: dict[str, Folder] = {}
    if source in (None, "home"):
        found.update(discover(home_root(home), "home", KIND, notes))
    if source in (None, "workspace") and workspace is not None:
        found.update(discover(workspace_root(workspace), "workspace", KIND, notes))
    return dict(sorted(found.items()))


def _sort_key(folder: Folder) -> tuple[bool, int, str]:
    order = folder.order
    return (order is None, order if order is not None else 0, folder.name)


def enabled_in_order(folders: dict[str, Folder]) -> list[Folder]:
    """PA-5: enabled attachments by ``order`` (missing last), then folder name."""
    return sorted((f for f in folders.values() if f.enabled), key=_sort_key)


def attachment_text(folder: Folder, kind: str, notes: list[str]) -> str | None:
    """PA-2: the folder's text for ``kind`` verbatim (trailing newline kept); None when
    the file is missing, empty or unreadable."""
    if kind not in ATTACHABLE:
        return None
    # <workspace>/.crystal/prompt-attachments/<name>: the file must stay in the workspace.
    inside = folder.path.parents[2] if folder.source == "workspace" else None
    return read_prompt_file(folder.file_for(kind), notes, inside=inside)


def require_attachment(folders: dict[str, Folder], name: str, where: str = "") -> Folder:
    problem = folder_name_problem(name)
    if problem:
        raise UserError(problem)
    if name not in folders:
        raise UserError(f"No prompt attachment '{name}'{where}.")
    return folders[name]


@contextmanager
def _locked(folders: dict[str, Folder]) -> Iterator[None]:
    """Hold the roots' manifest lock and re-read every manifest: another process may
    have enabled or renumbered since this view was discovered."""
    with manifest_lock(*{f.path.parent for f in folders.values()}):
        for folder in folders.values():
            folder.refresh()
        yield


def _renumber(order: list[Folder]) -> None:
    for index, folder in enumerate(order):
        folder.update(order=index)


def enable_attachment(folders: dict[str, Folder], name: str) -> str:
    """PA-5: append ``name`` to the enabled order and rewrite that order to 0..n-1."""
    target = require_attachment(folders, name)
    with _locked(folders):
        if target.enabled:
            return f"Prompt attachment '{name}' is already enabled."
        order = [f for f in enabled_in_order(folders) if f.name != name] + [target]
        target.update(enabled=True)
        _renumber(order)
    return f"Prompt attachment '{name}' is enabled ({target.source}), position {len(order)}."


def disable_attachment(folders: dict[str, Folder], name: str) -> str:
    """PA-5: ``enabled: false``; the others keep their numbers."""
    target = require_attachment(folders, name)
    with _locked(folders):
        if not target.enabled:
            return f"Prompt attachment '{name}' is already disabled."
        target.update(enabled=False)
    return f"Prompt attachment '{name}' is disabled ({target.source})."


def move_attachment(folders: dict[str, Folder], name: str, step: int) -> str:
    """PA-5: swap ``name`` with its neighbour in the enabled order (``step`` -1 up,
    +1 down) and rewrite the order to 0..n-1."""
    target = require_attachment(folders, name)
    with _locked(folders):
        order = enabled_in_order(folders)
        if target not in order:
            raise UserError(f"Prompt attachment '{name}' is not enabled; enable it before moving it.")
        index = order.index(target)
        other = index + step
        if not 0 <= other < len(order):
            raise UserError(f"Prompt attachment '{name}' is already {'first' if step < 0 else 'last'}.")
        order[index], order[other] = order[other], order[index]
        _renumber(order)
    return f"Prompt attachment '{name}' is now at position {other + 1} of {len(order)}."
