"""Front-agnostic handlers for ``/jobs``, ``/logs JOB [--follow]`` and ``/stop JOB``
(SPEC §11). Each front (kernel, magics, CLI) renders the returned
:class:`~crystal_kernel.host.commands.CommandResult`: ``text`` for plain fronts,
``data`` for fronts that draw widgets. ``--follow`` is carried in ``data``; a front
that can update its output live iterates :func:`follow_logs` from ``nextOffset``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from crystal_kernel.core.commands import CommandResult
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


def _words(args: list[str] | str) -> list[str]:
    return args.split() if isinstance(args, str) else list(args)


def jobs_rows(session: JobsOwner) -> list[dict[str, Any]]:
    """One dict per job (the status-file keys plus ``result``), oldest first."""
    rows = []
    for info in session.jobs.status():
        row = info.as_dict()
        row["result"] = outcome(info)
        rows.append(row)
    return rows


def jobs_command(session: JobsOwner, args: list[str] | str) -> CommandResult:
    """/jobs: the session's jobs as a table."""
    if _words(args):
        raise UserError("Usage: /jobs")
    manager: JobManager = session.jobs
    infos = manager.status()
    rows = jobs_rows(session)
    return CommandResult(job_table(infos, limit=manager.max_active), data={"jobs": rows}, kind="jobs")


def parse_logs_args(args: list[str] | str) -> tuple[str, bool]:
    """``JOB [--follow]`` -> (job id, follow)."""
    words = _words(args)
    follow = False
    rest = []
    for word in words:
        if word in ("--follow", "-f"):
            follow = True
        elif word.startswith("-"):
            raise UserError(f"/logs: unknown option {word}; usage: /logs JOB [--follow]")
        else:
            rest.append(word)
    if len(rest) != 1:
        raise UserError("Usage: /logs JOB [--follow]")
    return rest[0], follow


def logs_command(session: JobsOwner, args: list[str] | str) -> CommandResult:
    """/logs JOB [--follow]: the newest output of a job. With --follow, ``data`` says
    so and gives ``nextOffset`` for :func:`follow_logs`; a front that cannot update
    live shows the text as a snapshot."""
    job_id, follow = parse_logs_args(args)
    manager: JobManager = session.jobs
    try:
        chunk = manager.logs(job_id, None, COMMAND_LOG_BYTES)
        info = manager.status(job_id)
    except ToolError as exc:
        raise UserError(str(exc)) from None
    text = logs_header(info, chunk) + "\n" + chunk.text
    return CommandResult(
        text.rstrip("\n"),
        data={"jobId": info.id, "follow": follow and info.state == "running", "nextOffset": chunk.next_offset,
              "state": info.state, "logFile": info.log_file},
        kind="logs",
    )


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


async def stop_command(session: JobsOwner, args: list[str] | str) -> CommandResult:
    """/stop JOB: stop a job and its whole process tree."""
    words = _words(args)
    if len(words) != 1:
        raise UserError("Usage: /stop JOB")
    manager: JobManager = session.jobs
    try:
        before = manager.status(words[0])
        info = await manager.astop(words[0])
    except ToolError as exc:
        raise UserError(str(exc)) from None
    if before.state != "running":
        return CommandResult(f"Job {info.id} had already ended ({info.state}, {outcome(info)}).")
    return CommandResult(f"Stopped job {info.id} ({outcome(info)}) after {info.runtime_seconds:.1f}s.")
