"""A person's Stop that holds until the turn it stopped has ended (ROBUST-3).

One ``Task.cancel()`` is not enough on Python 3.11: a step the turn awaits can absorb
it. ``asyncio.wait_for`` returns a result that arrives in the moment the cancel lands
and drops the cancel, and code that catches ``CancelledError`` (the model's own async
code in the python tool) goes on. The turn then runs on with its task left
"cancelling": a Stop that landed while the kernel sent a chunk to the front sat out a
hung model stream that way. So the fronts in a notebook (the Crystal kernel and the
``%crystal`` magics) cancel the turn again every :data:`REPEAT_SECONDS` while it is
still the running turn.

Cancel paths that must finish (stopping a bash tree) run shielded and go on to their
end, so a repeat cuts nothing short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crystal_kernel.host.loop import Turn

# Soon enough after the first cancel for the turn to end within a second.
REPEAT_SECONDS = 0.4


class StandingStop:
    """Cancels a turn, and keeps cancelling it until it is no longer the running one."""

    def __init__(self) -> None:
        self._repeating: Turn | None = None  # the turn a repeat is scheduled for

    def cancel(self, turn: Turn, current: Callable[[], Turn | None]) -> None:
        """Cancel ``turn`` now and again every :data:`REPEAT_SECONDS` while ``current()``
        (the front's running turn) is still it. Call it on the turn's event loop."""
        turn.cancel()
        if self._repeating is turn:  # a second Stop of the same turn: already repeating
            return
        self._repeating = turn
        loop = asyncio.get_running_loop()

        def again() -> None:
            if current() is turn:
                turn.cancel()
                loop.call_later(REPEAT_SECONDS, again)
            elif self._repeating is turn:
                self._repeating = None

        loop.call_later(REPEAT_SECONDS, again)
