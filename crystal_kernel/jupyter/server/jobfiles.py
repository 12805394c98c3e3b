"""Reading the job files the job manager mirrors under
``<workspace>/.crystal/data/jobs/<session>/`` (no Jupyter imports here).

Per job (format: docs/jobs.md, written by jobs/job.py): ``<job>.json`` (the status,
rewritten atomically) and ``<job>.log`` plus at most one rotated ``<job>.log.1``
(jobs/logfile.py). Offsets
are absolute byte offsets into the job's whole output, like ``bash_logs``: the current
file starts at the status's ``logStart`` (or, failing that, ``bytes`` minus its size;
or 0 when it was never rotated), and the rotated file ends where the current one
starts. Bytes before the older file's start are gone; the reply says how many.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.store import SessionStore
from crystal_kernel.jobs.status import pid_alive
from crystal_kernel.jupyter.server.ids import NotFound, check_id, inside
from crystal_kernel.jupyter.server.workspaces import notebook_names, relative

MAX_LOG_CHUNK = 256 * 1024      # bytes per log request
MAX_JOBS_LISTED = 500
ACTIVE_STATES = ("running",)


def jobs_root(workspace: Path) -> Path:
    return paths.jobs_root(workspace)


@dataclass
class JobFiles:
    session: str
    job: str
    folder: Path

    @property
    def status_path(self) -> Path:
        return self.folder / f"{self.job}.json"

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.job}.log"

    @property
    def previous_path(self) -> Path:
        return self.folder / f"{self.job}.log.1"

    def status(self) -> dict[str, Any]:
        try:
            data = json.loads(self.status_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def locate(workspace: Path, session: str, job: str) -> JobFiles:
    """The files of one job; ids are checked and the folder must stay under the root."""
    check_id(session, "session")
    check_id(job, "job")
    root = jobs_root(workspace)
    folder = root / session
    files = JobFiles(session, job, folder)
    if not (files.status_path.exists() or files.log_path.exists()):
        raise NotFound(f"No job '{job}' in session '{session}'.")
    inside(workspace, folder)
    for path in (files.status_path, files.log_path, files.previous_path):
        if path.exists():
            inside(workspace, path)
    return files


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _runtime(status: dict[str, Any], state: str) -> float | None:
    """Seconds; a running job's status file is rewritten only every few seconds, so its
    runtime is counted here from ``startedAt``."""
    if state in ACTIVE_STATES and isinstance(status.get("startedAt"), str):
        try:
            started = datetime.fromisoformat(status["startedAt"])
            return max(0.0, round((datetime.now(timezone.utc) - started).total_seconds(), 1))
        except ValueError:
            pass
    return _number(status.get("runtimeSeconds"))


def job_row(files: JobFiles) -> dict[str, Any]:
    status = files.status()
    size = _size(files.log_path) + _size(files.previous_path)
    given = status.get("state")
    state: str = given if isinstance(given, str) else "unknown"
    if state in ACTIVE_STATES and not _host_alive(status):
        state = "lost"  # its host died without a final status (BG-2: the job died with it)
    return {
        "session": files.session,
        "id": files.job,
        "command": status.get("command", ""),
        "state": state,
        "exitCode": status.get("exitCode"),
        "signal": status.get("signal"),
        "started": status.get("startedAt"),
        "ended": status.get("endedAt"),
        "runtime": _runtime(status, state),
        "bytes": status.get("bytes", size),
        "stoppable": state in ACTIVE_STATES and isinstance(status.get("pid"), int),
    }


def list_jobs(workspace: Path) -> dict[str, Any]:
    """Every job with a status or log file, newest first."""
    root = jobs_root(workspace)
    rows: list[dict[str, Any]] = []
    try:
        sessions = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        sessions = []
    for folder in sessions:
        try:
            check_id(folder.name, "session")
            inside(workspace, folder)
        except UserError:
            continue
        names = {p.name.split(".", 1)[0] for p in folder.iterdir()
                 if p.suffix in (".json", ".log") or p.name.endswith(".log.1")}
        for job in sorted(names):
            try:
                check_id(job, "job")
            except UserError:
                continue
            rows.append(job_row(JobFiles(folder.name, job, folder)))
    rows.sort(key=lambda r: (r.get("started") or "", r["session"], _job_number(r["id"])), reverse=True)
    return {"workspace": str(workspace), "jobs": rows[:MAX_JOBS_LISTED]}


def list_jobs_in(root: Path, workspaces: list[Path]) -> dict[str, Any]:
    """The jobs of every workspace, newest first. Job ids count per session (j1, j2, …),
    so each row also says its session: its topic, notebook and workspace."""
    rows: list[dict[str, Any]] = []
    for folder in workspaces:
        jobs = list_jobs(folder)["jobs"]
        if not jobs:
            continue
        topics = {s.id: s.topic for s in SessionStore(folder).list()}
        notebooks = notebook_names(root, folder)
        for row in jobs:
            row.update({"workspace": relative(root, folder), "sessionTopic": topics.get(row["session"]),
                        "notebook": notebooks.get(row["session"])})
        rows += jobs
    rows.sort(key=lambda r: r.get("started") or "", reverse=True)
    return {"workspace": str(workspaces[0]) if workspaces else str(root), "jobs": rows[:MAX_JOBS_LISTED]}


def _job_number(job: str) -> int:
    return int(job[1:]) if job[1:].isdigit() else 0


def read_log(workspace: Path, session: str, job: str, offset: int | None, limit: int) -> dict[str, Any]:
    """Output from absolute ``offset`` (default: the last ``limit`` bytes), at most
    ``limit`` bytes, decoded as UTF-8 with replacement."""
    files = locate(workspace, session, job)
    status = files.status()
    current = _size(files.log_path)
    previous = _size(files.previous_path)
    start = status.get("logStart")
    if not isinstance(start, int) or isinstance(start, bool):
        total = status.get("bytes")
        if isinstance(total, int) and not isinstance(total, bool) and total >= current:
            start = total - current
        else:
            start = previous  # the rotated file is always exactly max_bytes long
    oldest = max(0, start - previous)
    end = start + current
    if offset is None:
        offset = max(oldest, end - limit)
    dropped = max(0, oldest - offset)
    offset = min(max(offset, oldest), end)
    stop = min(end, offset + limit)
    data = b""
    # The part still in the rotated file, then the part in the current file.
    if offset < start:
        data += _read(files.previous_path, offset - oldest, min(stop, start) - offset)
    if stop > start:
        begin = max(offset, start)
        data += _read(files.log_path, begin - start, stop - begin)
    data = _whole_characters(data)
    row = job_row(files)
    return {
        "session": session, "id": job, "offset": offset, "next": offset + len(data),
        "dropped": dropped, "end": end, "text": data.decode("utf-8", errors="replace"),
        "state": row["state"], "exitCode": row["exitCode"], "signal": row["signal"],
        "runtime": row["runtime"],
    }


def _whole_characters(data: bytes) -> bytes:
    """Cut an unfinished UTF-8 sequence at the end; the next read starts with it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # a lead byte: keep it only when its sequence is complete
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data


def _read(path: Path, position: int, count: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, position))
            return handle.read(max(0, count))
    except OSError:
        return b""


def _host_alive(status: dict[str, Any]) -> bool:
    """False only when the status names a host process that is gone."""
    pid = status.get("hostPid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return True
    return pid_alive(pid)


def stop_job(workspace: Path, session: str, job: str) -> dict[str, Any]:
    """SIGTERM to the job's supervisor (jobs/supervisor.py), which stops the whole tree
    (TERM, then KILL after its grace period). Refused when the job is not running or
    the recorded process is not that job's supervisor any more."""
    files = locate(workspace, session, job)
    status = files.status()
    row = job_row(files)
    if not row["stoppable"]:
        raise UserError(f"Job '{job}' is not running (it is {row['state']}).")
    pid = status.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise UserError(f"Job '{job}' records no process id; stop it from its notebook with /stop {job}.")
    if not _is_supervisor(pid):
        raise UserError(f"Job '{job}' is no longer running (its process {pid} is gone).")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        raise UserError(f"Job '{job}' is no longer running.") from None
    except PermissionError:
        raise UserError(f"Not allowed to stop job '{job}' (process {pid}).") from None
    return {"session": session, "id": job, "message": f"Stopping job '{job}'."}


def _is_supervisor(pid: int) -> bool:
    """Guard against a recycled pid: the process must be the jobs supervisor."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return any(arg.endswith(b"supervisor.py") for arg in argv)
