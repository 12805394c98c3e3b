"""Front-agnostic handlers for ``/jobs``, ``/logs JOB [--follow]`` and ``/stop JOB``
(SPEC §11), called by ``host.commands.submit`` with the op's typed values (core/ops.py
parses the words). Each front renders the answer: ``text`` for plain fronts, the typed
fields (core/commands.py ``JobsResult``, ``LogsResult``) for fronts that draw widgets; a
front that can update its output live iterates :func:`follow_logs` from ``next_offset``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from crystal_kernel.core.commands import JobsResult, LogsResult
from crystal_kernel.core.errors import ToolError, UserError
from crystal_kernel.jobs.format import job_table, logs_header, outcome
from crystal_kernel.jobs.manager import JobManager

# A person's /logs shows the newest output up to this much; older output is in the log file.
COMMAND_LOG_BYTES = 256 * 1024
FOLLOW_POLL_SECONDS = 1.0


class JobsOwner(Protocol):
    """What the job commands read of a session: its background jobs."""

    @property
    def jobs(self) -> JobManager: ...


def jobs_rows(session: JobsOwner) -> list[dict[str, Any]]:
    """One dict per job (the status-file keys plus ``result``), oldest first."""
    rows = []
    for info in session.jobs.status():
        row = info.as_dict()
        row["result"] = outcome(info)
        rows.append(row)
    return rows


def jobs_command(session: JobsOwner) -> JobsResult:
    """/jobs: the session's jobs as a table."""
    manager: JobManager = session.jobs
    infos = manager.status()
    return JobsResult(job_table(infos, limit=manager.max_active), jobs=tuple(jobs_rows(session)))


def logs_command(session: JobsOwner, job_id: str, *, follow: bool = False) -> LogsResult:
    """/logs JOB [--follow]: the newest output of a job. ``follow`` in the answer when
    asked and the job still runs, with ``next_offset`` for :func:`follow_logs`; a front
    that cannot update live shows the text as a snapshot."""
    manager: JobManager = session.jobs
    try:
        chunk = manager.logs(job_id, None, COMMAND_LOG_BYTES)
        info = manager.status(job_id)
    except ToolError as exc:
        raise UserError(str(exc)) from None
    text = logs_header(info, chunk) + "\n" + chunk.text
    return LogsResult(text.rstrip("\n"), job_id=info.id, follow=follow and info.state == "running",
                      next_offset=chunk.next_offset, state=info.state, log_file=info.log_file)


async def follow_logs(manager: JobManager, job_id: str, from_offset: int | None = None) -> AsyncIterator[str]:
    """Yield a job's new output as it arrives, from ``from_offset`` (default: the
    current end), until the job has ended and everything was yielded. Output that was
    dropped from the buffer before it could be read is announced in one line."""
    try:
        offset = manager.status(job_id).bytes if from_offset is None else from_offset
    except ToolError as exc:
        raise UserError(str(exc)) from None
    while True:
        ended = manager.status(job_id).state != "running"
        chunk = manager.logs(job_id, offset, COMMAND_LOG_BYTES)
        if chunk.dropped:
            yield f"\n[... {chunk.dropped} bytes were dropped from the buffer before they could be shown ...]\n"
        if chunk.text:
            yield chunk.text
        progressed = chunk.next_offset > offset
        offset = chunk.next_offset
        if chunk.remaining and progressed:
            continue  # a bounded read: more is already there
        if ended:
            return
        # Wait beyond everything written so far (not just ``offset``: the last bytes
        # may be half a character, held back until the rest arrives).
        await manager.wait_output(job_id, chunk.total, FOLLOW_POLL_SECONDS)


async def stop_command(session: JobsOwner, job_id: str) -> str:
    """/stop JOB: stop a job and its whole process tree."""
    manager: JobManager = session.jobs
    try:
        before = manager.status(job_id)
        info = await manager.astop(job_id)
    except ToolError as exc:
        raise UserError(str(exc)) from None
    if before.state != "running":
        return f"Job {info.id} had already ended ({info.state}, {outcome(info)})."
    return f"Stopped job {info.id} ({outcome(info)}) after {info.runtime_seconds:.1f}s."
