"""Plain-text views of jobs shared by the tools (what the model reads) and the slash
commands (what a person reads in any front)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the job machinery loads when a job starts
    from crystal_kernel.jobs.buffer import LogChunk
    from crystal_kernel.jobs.job import JobInfo

COMMAND_WIDTH = 60


def duration(seconds: float) -> str:
    """1.2s, 3m05s, 2h01m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def size(count: float) -> str:
    if count < 1024:
        return f"{count} B"
    for unit in ("KiB", "MiB", "GiB"):
        count /= 1024
        if count < 1024:
            return f"{count:.1f} {unit}"
    return f"{count:.1f} TiB"


def clock(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts is not None else "-"


def outcome(info: JobInfo) -> str:
    """exit 0, exit 3, SIGTERM, or - while running."""
    if info.exit_code is not None:
        return f"exit {info.exit_code}"
    return info.signal or "-"


def short_command(command: str, width: int = COMMAND_WIDTH) -> str:
    one_line = " ".join(command.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def describe_job(info: JobInfo) -> str:
    """Every field of one job, one per line."""
    lines = [
        f"Job {info.id}: {info.state}",
        f"Command: {info.command}",
        f"Started: {clock(info.started_at)}; ended: {clock(info.ended_at)}; runtime: {duration(info.runtime_seconds)}",
    ]
    if info.exit_code is not None:
        lines.append(f"Exit code: {info.exit_code}")
    elif info.signal:
        lines.append(f"Ended by signal: {info.signal}")
    lines.append(f"Output: {info.bytes} bytes ({size(info.bytes)}); the buffer holds offsets "
                 f"{info.buffer_start}-{info.bytes}")
    if info.state == "running" and info.timeout_seconds:
        lines.append(f"Stopped automatically after {duration(info.timeout_seconds)} (backgroundBashTimeoutSeconds).")
    return "\n".join(lines)


def job_table(jobs: list[JobInfo], *, limit: int | None = None) -> str:
    """One row per job, oldest first, with a count line."""
    if not jobs:
        return "No background jobs in this session."
    rows = [("ID", "STATE", "RESULT", "STARTED", "RUNTIME", "OUTPUT", "COMMAND")]
    for info in jobs:
        rows.append((info.id, info.state, outcome(info), clock(info.started_at), duration(info.runtime_seconds),
                     size(info.bytes), short_command(info.command)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    running = sum(1 for j in jobs if j.state == "running")
    tail = f"{running} running" + (f" (limit {limit})" if limit else "") + f", {len(jobs) - running} finished."
    return "\n".join(line.rstrip() for line in lines) + "\n" + tail


def logs_header(info: JobInfo, chunk: LogChunk) -> str:
    """The line before a log read: what range this is and how to continue."""
    parts = [f"[job {info.id} {info.state}", f"bytes {chunk.offset}-{chunk.next_offset} of {chunk.total}"]
    if chunk.dropped:
        parts.append(f"{chunk.dropped} bytes before offset {chunk.offset} were dropped from the buffer")
    if chunk.remaining:
        parts.append(f"{chunk.remaining} more bytes after this; read on with offset {chunk.next_offset}")
    else:
        parts.append(f"next offset {chunk.next_offset}")
    return "; ".join(parts) + "]"
