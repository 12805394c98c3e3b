"""Which folders under the server's root hold Crystal sessions or jobs.

A notebook's kernel works in the notebook's folder (or one it chose with ``/cd``), so a
server started above the notebooks (``make lab`` serves build/demo; the tours work in
build/demo/tour) finds nothing in its root's own ``.crystal``. Without an explicit
``?workspace=``, the API looks at the root and at the folders below it that have a
``.crystal`` folder, breadth first and bounded: at most ``MAX_DEPTH`` levels down, at most
``MAX_FOLDERS`` folders looked at, hidden folders and package trees skipped, symlinks
never followed (nothing outside the root is read). No Jupyter imports here.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter.notebook_map import notebooks_by_session

MAX_DEPTH = 3
MAX_FOLDERS = 2000
MAX_WORKSPACES = 50
SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env", "dist", "build-cache"})


def find_workspaces(root: Path) -> list[Path]:
    """``root`` (always first) and the folders under it with a ``.crystal`` folder."""
    found = [root]
    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    looked = 0
    while queue and looked < MAX_FOLDERS and len(found) < MAX_WORKSPACES:
        folder, depth = queue.popleft()
        looked += 1
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name in SKIP:
                continue
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            path = Path(entry.path)
            if depth + 1 <= MAX_DEPTH:
                crystal = paths.host_dir(path)
                if crystal.is_dir() and not crystal.is_symlink():
                    found.append(path)
                if depth + 1 < MAX_DEPTH:
                    queue.append((path, depth + 1))
    return found[:MAX_WORKSPACES]


def relative(root: Path, workspace: Path) -> str:
    """The workspace as the ``workspace`` query argument names it ("" for the root)."""
    rel = os.path.relpath(workspace, root)
    return "" if rel == "." else rel.replace(os.sep, "/")


def notebook_names(root: Path, workspace: Path) -> dict[str, str]:
    """Session id -> its notebook (jupyter/notebook_map.py), shown relative to the server
    root; a corrupt map names none (the sessions and jobs are still listed)."""
    try:
        return notebooks_by_session(workspace, root)
    except UserError:
        return {}
