"""The Crystal kernel's process-group guard (standard library only, run as a script).

Code the ``python`` notebook tool runs executes inside the kernel process, so the
processes it starts (``subprocess.Popen``, ``os.system``, ``!cmd``) are the kernel's own
children, not under the job supervisor. Jupyter starts every kernel as the leader of a
new session and process group, and such children stay in that group unless they leave
it on purpose. Jupyter signals the whole group when it shuts a kernel down, but a kernel
killed from outside (SIGKILL, the out-of-memory killer) leaves them running.

``python -I -S group_guard.py HOST_PID GRACE`` waits, in a session of its own, for the
host to die (a parent-death signal, ``PR_SET_PDEATHSIG``, and a ``getppid()`` poll as a
fallback). Then it sends SIGTERM to the host's process group, and SIGKILL to whatever is
left after GRACE seconds. A signal while the host is alive just ends the guard: it never
touches a group whose leader lives. ROBUST-3.
"""

import _signal as signal  # the C module: importing `signal` costs ~5 ms (enum)
import ctypes
import os
import sys
import time

PR_SET_PDEATHSIG = 1
WAKE = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
POLL_SECONDS = 0.5


def _host_gone(host: int) -> bool:
    return os.getppid() != host


def _stop_group(pgid: int, grace: float) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    host, grace = int(argv[1]), float(argv[2])
    signal.pthread_sigmask(signal.SIG_BLOCK, WAKE)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the poll below still notices
    while not _host_gone(host):  # checked first: the host may have died before prctl
        got = signal.sigtimedwait(WAKE, POLL_SECONDS)
        if got is not None:
            # The parent-death signal arrives once the host is gone; any other stop
            # signal while it lives only ends the guard.
            for _ in range(20):
                if _host_gone(host):
                    break
                time.sleep(0.05)
            else:
                return 0
    _stop_group(host, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
