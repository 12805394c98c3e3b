"""Which session a notebook holds, so the conversation follows the notebook (SPEC §13
"Notebook identity"): through rename, move, kernel restart and reopening.

The notebook itself keeps its session's id in ``metadata.crystal.session_id``: it moves
with the file whatever it is called. The kernel learns it from the lab extension, which
sends ``{"notebook": {"path": P, "sessionId": ID}}`` when it opens the ``crystal.live``
comm (on every connection and after each restart, live_outputs.py); the kernel tells the
page its session in every Crystal output's ``metadata.crystal.session``, and the
extension writes that into the notebook's metadata (labextension/src/forms.ts).

What the page sends is untrusted: a path is kept only as a bounded string, an id only
when it is a session id's shape; a session is continued only when this Home signed it
(TRUST-5, checked by the kernel before resuming).
"""

from __future__ import annotations

import re
from typing import Any

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_PATH = 4096

# What the front end said about the notebook this kernel serves ("reported": it said
# anything at all, i.e. a page with the lab extension is there), and the session the
# kernel holds now (named in every output's metadata).
_STATE: dict[str, Any] = {"reported": False, "path": None, "session_id": None, "current": None}


def learn_from_front(data: Any) -> None:
    """Take the ``notebook`` part of the ``crystal.live`` comm's open message."""
    if not isinstance(data, dict):
        return
    path = data.get("path")
    sid = data.get("sessionId")
    _STATE["reported"] = True
    _STATE["path"] = path if isinstance(path, str) and 0 < len(path) <= MAX_PATH else None
    _STATE["session_id"] = sid if isinstance(sid, str) and _ID.match(sid) else None


def reported() -> bool:
    """Whether a page with the lab extension told this kernel about its notebook."""
    return bool(_STATE["reported"])


def notebook_session_id() -> str | None:
    """The session id the notebook's metadata names, as the page reported it."""
    value = _STATE["session_id"]
    return value if isinstance(value, str) else None


def notebook_path() -> str | None:
    """The notebook's path now (after a rename or move), as the page reported it."""
    value = _STATE["path"]
    return value if isinstance(value, str) else None


def set_current(session_id: str | None) -> None:
    """The session this kernel holds now; outputs name it so the page can keep it."""
    _STATE["current"] = session_id
    if session_id:  # the notebook holds this session from now on
        _STATE["session_id"] = session_id


def current() -> str | None:
    value = _STATE["current"]
    return value if isinstance(value, str) else None


def reset() -> None:
    """Forget everything (tests)."""
    _STATE.update({"reported": False, "path": None, "session_id": None, "current": None})
