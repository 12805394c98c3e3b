"""Access grants a session document may carry (TRUST-3): only what the person granted.

A session document lists the directories added with ``/access add``. The document lives
in the workspace, where a tool (or anyone) can edit it, so the host signs that list with
an HMAC whose key lives in Home (``{home}/session-key``, created once, mode 0600) and
binds it to the session id and the workspace. On resume a list whose signature does not
match, or that has none, grants nothing: the directories are dropped with a note and the
person adds them again with ``/access add``.

The key's value is a host secret (TRUST-7): every time it is read or made here it is
registered with core/secrets.py, so its text is redacted from every tool result and
everything the host saves, as a model key is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from crystal_kernel.core.secrets import register_host_secret

KEY_FILE = "session-key"
_keys: dict[str, bytes] = {}
_lock = threading.Lock()


def home_key(home: Path, *, create: bool) -> bytes | None:
    """Home's signing key (grants, session journals); made on first use when ``create``.
    None when unavailable."""
    path = Path(home) / KEY_FILE
    cache = str(path)
    with _lock:
        if cache in _keys:
            _register(_keys[cache])  # the Home in use stays among the newest secrets
            return _keys[cache]
        try:
            key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        except FileNotFoundError:
            if not create:
                return None
            key = secrets.token_bytes(32)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="ascii") as handle:
                    handle.write(key.hex() + "\n")
            except FileExistsError:  # another process made it first: use that one
                try:
                    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
                except (OSError, ValueError):
                    return None
            except OSError:
                return None
        except (OSError, ValueError):
            return None
        if len(key) < 16:
            return None
        _keys[cache] = key
        _register(key)
        return key


def _register(key: bytes) -> None:
    # The file holds the hex text: that (in either case) is what a tool could print.
    register_host_secret(KEY_FILE, key.hex().upper())
    register_host_secret(KEY_FILE, key.hex())


def _message(session_id: str, workspace: Path, directories: list[dict[str, Any]]) -> bytes:
    rows = sorted((str(d.get("path")), str(d.get("mode", "rw"))) for d in directories if isinstance(d, dict))
    return json.dumps({"id": session_id, "workspace": str(workspace), "directories": rows},
                      sort_keys=True).encode("utf-8")


def sign(home: Path, session_id: str, workspace: Path, directories: list[dict[str, Any]]) -> str | None:
    """The signature of a directory list; None when there is nothing to sign or no key."""
    if not directories:
        return None
    key = home_key(home, create=True)
    if key is None:
        return None
    return hmac.new(key, _message(session_id, workspace, directories), hashlib.sha256).hexdigest()


def verify(home: Path, session_id: str, workspace: Path, directories: list[dict[str, Any]],
           signature: Any) -> bool:
    """True when the person granted exactly this list in this Home for this session."""
    if not directories:
        return True
    key = home_key(home, create=False)
    if key is None or not isinstance(signature, str):
        return False
    expected = hmac.new(key, _message(session_id, workspace, directories), hashlib.sha256).hexdigest()
    # As bytes: compare_digest raises on a str with non-ASCII characters (an edited document's).
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "surrogatepass"))
