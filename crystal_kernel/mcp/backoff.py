"""When a failed MCP server is tried again, and what calls say meanwhile (MCP-R).

A server that could not start, or that stopped, is tried again at a later call, never
sooner than its backoff allows: 1 s after the first failure, then 2, 4, 8, ... seconds,
at most 30 s apart, so a server that stays down costs a long-lived session (a kernel)
one quick failed try now and then instead of a wait at every call, and comes back on
its own once it is up. A server that stopped after it had answered is started again at
the very next call (a crash or a restart of its host is usually over by then); failures
count until the server answers a call again.

Times are shown on the person's clock, to the second; a next try is shown rounded up,
so "next try after 21:03:08" is never early.
"""

from __future__ import annotations

import math
import time

BASE_SECONDS = 1.0
CAP_SECONDS = 30.0


def clock(wall: float) -> str:
    """``wall`` (seconds since the epoch) as the local time of day, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(wall))


class Backoff:
    """The failures of one server since it last answered, and when to try next."""

    def __init__(self) -> None:
        self.failures = 0
        self.what = ""  # what happened last, e.g. "could not reach http://…: connection refused"
        self.tail = ""  # the server's last lines on stderr then, if any
        self._failed_wall = 0.0
        self._retry_monotonic = 0.0
        self._retry_wall = 0.0

    def failed(self, what: str, *, stopped: bool, tail: str = "") -> None:
        """Record a failure: ``stopped`` when a server that was running went away (the
        first such failure allows a try at once), else a start that failed."""
        self.failures += 1
        self.what, self.tail = what, tail
        delay = 0.0 if stopped and self.failures == 1 else min(BASE_SECONDS * 2 ** (self.failures - 1), CAP_SECONDS)
        now_wall, now = time.time(), time.monotonic()
        self._failed_wall = now_wall
        # Rounded up to the second shown, and the wait measured on the monotonic clock.
        self._retry_wall = math.ceil(now_wall + delay) if delay else now_wall
        self._retry_monotonic = now + (self._retry_wall - now_wall)

    def answered(self) -> None:
        """The server answered a call: the next failure starts the count again."""
        self.failures = 0
        self._retry_monotonic = 0.0

    def waiting(self) -> bool:
        """Whether a try now would be inside the backoff window."""
        return time.monotonic() < self._retry_monotonic

    def next_try(self) -> str:
        """When the next try may happen (HH:MM:SS)."""
        return clock(self._retry_wall)

    def last(self) -> str:
        """What happened last and when the server is tried again, as the end of a
        sentence that starts with the server's name: "could not reach http://…:
        connection refused at 21:03:04; next try after 21:03:06." (then its stderr)."""
        when = clock(self._failed_wall)
        after = (f"next try after {self.next_try()}." if self._retry_wall > self._failed_wall
                 else "it is started again at the next call.")
        text = f"{self.what} at {when}; {after}"
        return f"{text} Its last output on stderr:\n{self.tail}" if self.tail else text
