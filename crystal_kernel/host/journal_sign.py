"""The Home key's signature on a session journal (TRUST-5, TRUST-7).

A journal lives in the workspace, where a repository or a tool can plant, edit, cut back
or copy one. What ``/resume``, the reviewer and the grants rely on (which session is the
newest, which lines the person wrote, which folders the person added) counts only when
the host that owns this Home wrote it, for this workspace and this session id, and it is
still the last save the host made. Each save ends with a signature line::

    {"t":"sig","v":2,"c":"<chain>","s":"<tail>"}

- ``c`` is a running HMAC-SHA256 chain under the Home key (``{home}/session-key``,
  host/grants.py): ``c = HMAC(key, previous c + every byte the save wrote before this
  line)``, starting from ``HMAC(key, "crystal-journal-v2" + workspace + session id)``,
  the workspace being its resolved path. It covers every line of the file, so a changed,
  added or removed line breaks it, and a journal copied into another workspace or renamed
  to another id does not verify there. Checking it costs one HMAC pass over the file,
  done while resume reads it anyway.
- ``s`` is ``HMAC(key, "tail" + workspace + session id + c + the line a listing reads
  ``updated`` from)``: the save's closing set line, or for a snapshot its first line. A
  listing, which reads only a journal's two ends, checks that the ``updated`` it sorts by
  was written by this Home for this session in this workspace.
- A whole journal cut back to an earlier save, or an older copy put back, still carries
  valid lines. The Home's index (host/journal_index.py) records each session's last
  signed size and chain; a journal that is not that save is not the host's either.

A journal that fails (planted, edited, cut back, older, copied, written before
signatures, signed in the older format without ``"v":2``, or in another Home) is
foreign: a bare ``/resume`` never picks it; opened by id it is read as history, its
messages marked ``unverified`` so none reaches the reviewer as the person's, and the
folders it lists are not granted again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

from crystal_kernel.host.grants import home_key

SIG_PREFIX = b'{"t":"sig",'
# The signature format this version writes; a sig line without it is the older format
# (bound to the session id only), read as unverified.
SIG_VERSION = 2
_SEED = b"crystal-journal-v2\0"


@dataclass(frozen=True)
class Signer:
    """What signs and checks the journals of one workspace in one Home."""

    key: bytes
    home: Path
    # The workspace's resolved path: what the signature binds.
    workspace: str

    @property
    def place(self) -> bytes:
        """The workspace as bytes (a path that is not UTF-8 stays itself)."""
        return os.fsencode(self.workspace)


def resolved_workspace(workspace: Path) -> str:
    """The path a signature binds: the workspace resolved (links, ``..``)."""
    try:
        return str(Path(workspace).resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(workspace)


def signer_for(home: Path | None, workspace: Path, *, create: bool) -> Signer | None:
    """The signer of ``workspace``'s journals in ``home``; None when there is no Home or
    its key cannot be read (or made, with ``create``)."""
    if home is None:
        return None
    key = home_key(Path(home), create=create)
    return None if key is None else Signer(key, Path(home), resolved_workspace(workspace))


def seed(signer: Signer, session_id: str) -> bytes:
    """Where a session's chain starts: bound to the workspace and the session id."""
    return hmac.new(signer.key, _SEED + signer.place + b"\0" + session_id.encode("utf-8"), hashlib.sha256).digest()


def _tail(signer: Signer, session_id: str, chain: bytes, last_line: bytes) -> str:
    message = b"tail\0" + signer.place + b"\0" + session_id.encode("utf-8") + b"\0" + chain + b"\0" + last_line
    return hmac.new(signer.key, message, hashlib.sha256).hexdigest()


def sign_save(signer: Signer, session_id: str, previous: bytes | None, lines: list[str]) -> tuple[str, bytes]:
    """The signature line that closes a save of ``lines`` (written after them), and the
    chain value the next save continues from. ``previous`` None: a snapshot (the chain
    starts again from the session's seed)."""
    body = ("\n".join(lines) + "\n").encode("utf-8")
    mac = hmac.new(signer.key, previous if previous is not None else seed(signer, session_id), hashlib.sha256)
    mac.update(body)
    chain = mac.digest()
    anchor = lines[0] if previous is None else lines[-1]
    line = json.dumps({"t": "sig", "v": SIG_VERSION, "c": chain.hex(),
                       "s": _tail(signer, session_id, chain, anchor.encode("utf-8"))}, separators=(",", ":"))
    return line, chain


def verify_chain(signer: Signer | None, session_id: str, body: bytes, end: int) -> bytes | None:
    """The chain value after the journal's last line when every line up to ``end`` is
    covered by valid signatures of this format and the last line is one; None otherwise."""
    if signer is None or end == 0:
        return None
    view = memoryview(body)
    chain = seed(signer, session_id)
    start = 0  # where the segment the next signature covers begins
    at = body.find(b"\n" + SIG_PREFIX, 0, end)
    while at >= 0:
        line_start = at + 1
        line_end = body.find(b"\n", line_start, end)
        if line_end < 0:
            return None
        try:
            line = json.loads(view[line_start:line_end].tobytes())
            expected = bytes.fromhex(line["c"]) if line.get("v") == SIG_VERSION else b""
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        mac = hmac.new(signer.key, chain, hashlib.sha256)
        mac.update(view[start:line_start])
        if not hmac.compare_digest(mac.digest(), expected):
            return None
        chain, start = expected, line_end + 1
        at = body.find(b"\n" + SIG_PREFIX, line_end, end)
    return chain if start == end else None


def older_format(sig_line: bytes) -> bool:
    """True when ``sig_line`` is a signature line of the format before TRUST-7 (no
    ``"v":2``): such a journal is unverified, and the note says why."""
    if not sig_line.startswith(SIG_PREFIX):
        return False
    try:
        line = json.loads(sig_line)
    except ValueError:
        return False
    return isinstance(line, dict) and "v" not in line and "c" in line


def tail_signed(signer: Signer | None, session_id: str, anchor: bytes, sig_line: bytes) -> bytes | None:
    """The chain ``sig_line`` carries when it signs ``anchor`` (a save's closing set line,
    or a snapshot's first line) for this session in this workspace and Home; None
    otherwise. What a listing checks before it trusts ``updated`` (and then compares the
    chain with the Home's index)."""
    if signer is None or not sig_line.startswith(SIG_PREFIX):
        return None
    try:
        line = json.loads(sig_line)
        chain = bytes.fromhex(line["c"])
        given = line["s"]
        version = line.get("v")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if version != SIG_VERSION or not isinstance(given, str):
        return None
    # As bytes: compare_digest refuses str with non-ASCII characters (a planted line's).
    expected = _tail(signer, session_id, chain, anchor).encode("ascii")
    return chain if hmac.compare_digest(expected, given.encode("utf-8", "surrogatepass")) else None
