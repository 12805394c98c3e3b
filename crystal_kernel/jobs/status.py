"""Per-job status files: ``<log_dir>/<job_id>.json``, written atomically.

They let a reader without the kernel (the Jupyter server extension) list a session's
jobs and serve their logs. The format is documented in docs/jobs.md; the keys are
camelCase like every file Crystal writes.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crystal_kernel.core.fsutil import atomic_write_json

STATUS_VERSION = 1
JOB_ID = re.compile(r"^j([1-9][0-9]{0,8})$")


def iso(ts: float | None) -> str | None:
    """An epoch time as ISO 8601 in UTC with seconds and milliseconds."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


def write_status(path: Path, data: dict[str, Any], *, durable: bool = True, inside: Path | None = None) -> str | None:
    """Write one status file atomically; returns an English reason instead of raising
    on failure (the status file is a mirror, never a reason for a job to fail).

    ``durable=False`` skips the fsync (still temp file + rename, so a reader never sees
    half a file): progress updates happen while output streams, and an fsync (~6 ms
    here) on the capture thread would stall the job's pipe. ``inside``: no symbolic link
    between that folder and the file redirects the write (TRUST-3, fsutil).
    """
    from crystal_kernel.core.secrets import redact

    try:
        atomic_write_json(path, redact(data), fsync=durable, inside=inside)  # TRUST-4: no key values on disk
        return None
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists (one owned by another user too: signal 0 to it
    is refused, yet it is alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def next_job_number(log_dir: Path | None) -> int:
    """1 + the highest job number with a status file in ``log_dir`` (1 when none), so
    that a session resumed in a new process never reuses an old job's files."""
    highest = 0
    if log_dir is None:
        return 1
    try:
        names = os.listdir(log_dir)
    except OSError:
        return 1
    for name in names:
        if name.endswith(".json"):
            match = JOB_ID.match(name[:-5])
            if match:
                highest = max(highest, int(match.group(1)))
    return highest + 1


def mark_lost(log_dir: Path | None) -> list[str]:
    """Status files that still say ``running`` although their host process is gone (it
    was killed) are rewritten with state ``lost``; unknown keys are kept and files that
    are not valid JSON are left as they are. Returns the job ids marked."""
    marked: list[str] = []
    if log_dir is None or not log_dir.is_dir():
        return marked
    for path in sorted(log_dir.glob("j*.json")):
        if not JOB_ID.match(path.stem):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("state") != "running":
            continue
        host = data.get("hostPid")
        if isinstance(host, int) and pid_alive(host):
            continue  # a live process (maybe this one) still owns that job
        data["state"] = "lost"
        data["updatedAt"] = iso(datetime.now(timezone.utc).timestamp())
        if write_status(path, data) is None:
            marked.append(path.stem)
    return marked
