"""The Home key's signature on a session journal (TRUST-5).

A journal lives in the workspace, where a repository or a tool can plant or edit one.
What ``/resume`` and the reviewer rely on (which session is the newest, which lines the
person wrote) counts only when the host that owns this Home wrote it. Each save ends
with a signature line::

    {"t":"sig","c":"<chain>","s":"<tail>"}

- ``c`` is a running HMAC-SHA256 chain under the Home key (``{home}/session-key``,
  host/grants.py): ``c = HMAC(key, previous c + every byte the save wrote before this
  line)``, starting from ``HMAC(key, "crystal-journal-v1" + session id)``. It covers every
  line of the file, so a changed, added or removed line breaks it. Checking it costs one
  HMAC pass over the file, done while resume reads it anyway.
- ``s`` is ``HMAC(key, "tail" + session id + c + the line a listing reads ``updated``
  from)``: the save's closing set line, or for a snapshot its first line. A listing,
  which reads only a journal's two ends, checks that the ``updated`` it sorts by was
  written by this Home for this session id.

A journal without a valid chain (planted, edited, written before signatures, or in
another Home) is foreign: a bare ``/resume`` never picks it; opened by id it is read as
history, its messages marked ``unverified`` so none reaches the reviewer as the person's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from crystal_kernel.host.grants import home_key

SIG_PREFIX = b'{"t":"sig",'
_SEED = b"crystal-journal-v1\0"


def key_for(home: Path | None, *, create: bool) -> bytes | None:
    """The Home key, or None (no Home given, or it cannot be read or made)."""
    return None if home is None else home_key(Path(home), create=create)


def seed(key: bytes, session_id: str) -> bytes:
    return hmac.new(key, _SEED + session_id.encode("utf-8"), hashlib.sha256).digest()


def _tail(key: bytes, session_id: str, chain: bytes, last_line: bytes) -> str:
    message = b"tail\0" + session_id.encode("utf-8") + b"\0" + chain + b"\0" + last_line
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign_save(key: bytes, session_id: str, previous: bytes | None, lines: list[str]) -> tuple[str, bytes]:
    """The signature line that closes a save of ``lines`` (written after them), and the
    chain value the next save continues from. ``previous`` None: a snapshot (the chain
    starts again from the session's seed)."""
    body = ("\n".join(lines) + "\n").encode("utf-8")
    mac = hmac.new(key, previous if previous is not None else seed(key, session_id), hashlib.sha256)
    mac.update(body)
    chain = mac.digest()
    anchor = lines[0] if previous is None else lines[-1]
    line = json.dumps({"t": "sig", "c": chain.hex(), "s": _tail(key, session_id, chain, anchor.encode("utf-8"))},
                      separators=(",", ":"))
    return line, chain


def verify_chain(key: bytes | None, session_id: str, body: bytes, end: int) -> bytes | None:
    """The chain value after the journal's last line when every line up to ``end`` is
    covered by valid signatures and the last line is one; None otherwise."""
    if key is None or end == 0:
        return None
    view = memoryview(body)
    chain = seed(key, session_id)
    start = 0  # where the segment the next signature covers begins
    at = body.find(b"\n" + SIG_PREFIX, 0, end)
    while at >= 0:
        line_start = at + 1
        line_end = body.find(b"\n", line_start, end)
        if line_end < 0:
            return None
        try:
            expected = bytes.fromhex(json.loads(view[line_start:line_end].tobytes())["c"])
        except (ValueError, KeyError, TypeError):
            return None
        mac = hmac.new(key, chain, hashlib.sha256)
        mac.update(view[start:line_start])
        if not hmac.compare_digest(mac.digest(), expected):
            return None
        chain, start = expected, line_end + 1
        at = body.find(b"\n" + SIG_PREFIX, line_end, end)
    return chain if start == end else None


def tail_signed(key: bytes | None, session_id: str, anchor: bytes, sig_line: bytes) -> bool:
    """True when ``sig_line`` signs ``anchor`` (a save's closing set line, or a
    snapshot's first line) for this session in this Home: what a listing checks before
    it trusts ``updated``."""
    if key is None or not sig_line.startswith(SIG_PREFIX):
        return False
    try:
        line = json.loads(sig_line)
        chain = bytes.fromhex(line["c"])
        given = line["s"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(given, str) and hmac.compare_digest(_tail(key, session_id, chain, anchor), given)
