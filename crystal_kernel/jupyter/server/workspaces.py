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
from typing import Any

from crystal_kernel.core import paths
from crystal_kernel.core.fsutil import read_json_object

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


def notebooks_by_session(root: Path, workspace: Path) -> dict[str, str]:
    """Session id -> the notebook that used it last (from ``.crystal/notebooks.json``,
    written by the kernel and the magics), as a path relative to the server root when
    it is under it."""
    path = paths.notebook_map_file(workspace)
    try:
        data: dict[str, Any] = read_json_object(path, "notebook map") if path.is_file() else {}
    except Exception:
        return {}
    notebooks = data.get("notebooks")
    out: dict[str, str] = {}
    if not isinstance(notebooks, dict):
        return out
    entries = sorted(((k, v) for k, v in notebooks.items() if isinstance(v, dict)),
                     key=lambda kv: str(kv[1].get("updated", "")))
    for name, entry in entries:  # newest last: a session keeps the notebook that used it last
        session = entry.get("session")
        if isinstance(session, str) and isinstance(name, str):
            out[session] = _shown(root, workspace, name)
    return out


def _shown(root: Path, workspace: Path, name: str) -> str:
    path = Path(name)
    if path.is_absolute():
        path = Path(os.path.realpath(path))
    else:
        # jupyter_server gives kernels the notebook's path relative to its root.
        return name
    try:
        return os.path.relpath(path, root) if root in path.parents else path.name
    except ValueError:
        return path.name
