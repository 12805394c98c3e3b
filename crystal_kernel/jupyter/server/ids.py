"""Ids and paths checked the same way by the REST API (server/base.py) and by the
kernel's sidebar comm (jupyter/sidebar_comm.py). No Jupyter imports here: the kernel
uses these without loading jupyter_server."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crystal_kernel.core.errors import UserError

# The same shape as session ids (host/store.py): no separators, cannot start with a dot.
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_ID = re.compile(rf"^{ID_PATTERN}$")


class NotFound(Exception):
    """The named thing does not exist (404 with a JSON error)."""


def check_id(value: str, what: str) -> str:
    """Refuse anything that is not a plain id (no separators, no leading dot)."""
    if not _ID.match(value or "") or ".." in value:
        raise UserError(f"'{value}' is not a valid {what} id.")
    return value


def inside(root: Path, path: Path) -> Path:
    """``path`` resolved (symlinks followed); UserError when it leaves ``root``."""
    resolved = Path(os.path.realpath(path))
    if resolved != root and root not in resolved.parents:
        raise UserError("That path is outside the server's root folder.")
    return resolved
