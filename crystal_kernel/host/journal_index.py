"""Home's record of each session's last signed save (TRUST-7).

A journal's signature (host/journal_sign.py) proves the host wrote every line, but not
that the file is still the *last* save: a journal cut back to an earlier save, or an
older copy put back, carries valid signatures too. So the host keeps, outside every
workspace, one small record per session of the save it made last::

    {home}/session-index/<first 40 hex of SHA-256(workspace \\0 session id)>.json
    {"workspace": "/resolved/path", "id": "<session id>", "size": 12345, "chain": "<hex>"}

``size`` is the journal's length in bytes after that save and ``chain`` its signature
chain there. A journal counts as signed only when its length and its chain are exactly
these (host/journal.py checks them on resume, host/store.py on every listing).

One file per session: a save writes only its own record (atomically, no link followed
below Home, TRUST-3), two fronts saving different sessions never race for one file, and
a damaged record costs one session. Reading never changes a record: a missing one (a
session saved before TRUST-7, or in another workspace) or a corrupt one leaves that
session unverified, with a note; the next save this Home signs for the session writes a
new record. The folder is bounded (:data:`LIMIT` records): when a new record would pass
it, the records written longest ago are removed, and their sessions read as unverified.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from crystal_kernel.core.fsutil import atomic_write_text
from crystal_kernel.host.journal_sign import Signer

INDEX_DIR = "session-index"
# Records kept; each is one small file. Past this, the oldest go (their sessions turn
# unverified: still readable by id, never picked by a bare /resume).
LIMIT = 2000
# A record is a few hundred bytes; anything much larger is not one.
_MAX_RECORD = 1 << 16


def record_path(signer: Signer, session_id: str) -> Path:
    """Where the record of ``session_id`` in the signer's workspace lives."""
    name = hashlib.sha256(signer.place + b"\0" + session_id.encode("utf-8")).hexdigest()[:40]
    return signer.home / INDEX_DIR / f"{name}.json"


def record(signer: Signer, session_id: str, size: int, chain: bytes) -> str | None:
    """Remember that the journal of ``session_id`` is now ``size`` bytes ending with
    ``chain``. None when written; else one line saying why not (the save itself stands,
    and the session reads as unverified until a later save is recorded)."""
    path = record_path(signer, session_id)
    new = not path.exists()
    text = json.dumps({"workspace": signer.workspace, "id": session_id, "size": size, "chain": chain.hex()})
    try:
        atomic_write_text(path, text + "\n", inside=signer.home)
    except OSError as exc:
        return (f"Crystal Home could not record the last save of session {session_id} in {path.parent} "
                f"({exc.strerror or exc}); it will be read as unverified until a save is recorded.")
    if new:
        _prune(path.parent)
    return None


def check(signer: Signer, session_id: str, size: int, chain: bytes) -> str | None:
    """None when a journal of ``size`` bytes ending with ``chain`` is the last save this
    Home recorded for the session in this workspace; else one line saying why it is not."""
    path = record_path(signer, session_id)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_RECORD + 1)
    except FileNotFoundError:
        return (f"Crystal Home has no record of saving session {session_id} in this workspace (it was "
                "copied or renamed from elsewhere, saved before this version, or its record was dropped)")
    except OSError as exc:
        return f"Crystal Home's record of session {session_id} ({path}) cannot be read ({exc.strerror or exc})"
    try:
        data = json.loads(raw) if len(raw) <= _MAX_RECORD else None
        if not isinstance(data, dict):
            raise ValueError("not a record")
        known_size, known_chain = int(data["size"]), bytes.fromhex(data["chain"])
    except (ValueError, TypeError, KeyError, RecursionError):
        return f"Crystal Home's record of session {session_id} ({path}) is corrupt; it was left as it is"
    if data.get("workspace") != signer.workspace or data.get("id") != session_id:
        return f"Crystal Home's record of session {session_id} ({path}) is for another session"
    if (known_size, known_chain) != (size, chain):
        return (f"session {session_id} is not the last save Crystal Home recorded of it (the journal was cut "
                "back to an earlier save, an older copy was put back, or Crystal stopped between saving it and "
                "recording the save)")
    return None


def _prune(folder: Path) -> None:
    """Keep at most :data:`LIMIT` records: the ones written longest ago go first."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in entries
                     if e.name.endswith(".json") and e.is_file(follow_symlinks=False)]
    except OSError:
        return
    if len(found) <= LIMIT:
        return
    found.sort()
    for _, name in found[:len(found) - LIMIT]:
        with contextlib.suppress(OSError):
            os.unlink(folder / name)
