"""How long a process's threads waited for a CPU: Linux's per-thread run-queue delay
(/proc/PID/task/TID/schedstat, second field, nanoseconds).

A test that promises "within N seconds" of the host's own work subtracts this from the
wall time it measured: on the 2 shared cores a loaded machine keeps a ready thread off
the CPU for seconds, which is the machine's time, not the host's. The strict
wall-clock figure on a quiet machine is bench/'s job.
"""

from __future__ import annotations

import os


def runqueue_wait(pid: int | None = None) -> float:
    """Seconds the live threads of ``pid`` (this process by default) have spent ready to
    run but waiting for a CPU; 0.0 where the kernel does not report it."""
    base = f"/proc/{pid or os.getpid()}/task"
    total = 0
    try:
        tids = os.listdir(base)
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9
