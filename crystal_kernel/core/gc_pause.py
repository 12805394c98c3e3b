"""Garbage collection paused while a bulk of long-lived objects is built.

Resuming a session builds every message of its journal as objects that all stay alive
(a 50 MiB journal: ~26,000 messages, ~250,000 tracked objects). Each batch of new
objects starts a collection, and as they pile up the full collections come again and
again over a heap that only grows, none of them finding garbage: measured, resume of a
50 MiB session took twice as long with the collector on (docs/benchmarks.md). Parsing
makes no reference cycles, so nothing is lost by not collecting while it runs.

Nor afterwards: turned on again, the collector's first young collection went over every
object built (0.13–0.15 s of CPU for that journal, inside resume) and a later middle
collection over them again, only to move them to the oldest generation. The block ends
by moving them there itself (``gc.freeze()`` then ``gc.unfreeze()``: two list splices),
where the full collections see them as they would have anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic garbage collector for the block (process-wide), then enable it
    again if it was on. Nested blocks leave it to the outermost one. Reference counting
    still frees everything that is not in a cycle; keep the block bounded (one file's
    parse), since other threads' cyclic garbage also waits until it ends.

    When the block ends normally, every object the collector tracks goes to its oldest
    generation (see the module); not when something else holds objects frozen
    (``gc.freeze()`` without ``gc.unfreeze()``), which this must not release."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
        promote_to_oldest()
    finally:
        gc.enable()


def promote_to_oldest() -> bool:
    """Move every object the collector tracks to its oldest generation without examining
    any (no collection runs); False, and nothing moved, when some are held frozen."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    gc.unfreeze()
    return True


#: Whether this process's front paused the collector for its start (pause_front_start).
_front_start_paused = False


def pause_front_start() -> None:
    """A front that runs in a process of its own (``crystal acp``, ``tools``, the interactive
    ``crystal``; ``crystal run`` has its own pause in cli/__init__.py) turns the collector off
    while it imports: the host and the SDKs allocate hundreds of thousands of objects that
    live as long as the process, and the collector would walk them again and again (~10%
    of an ACP agent's CPU in tests/acp). :func:`end_front_start` turns it back on."""
    global _front_start_paused
    if gc.isenabled():
        gc.disable()
        _front_start_paused = True


def end_front_start() -> None:
    """The start is over: what it imported goes to the oldest generation (see the module)
    and the collector is on again, if :func:`pause_front_start` turned it off."""
    global _front_start_paused
    if _front_start_paused:
        _front_start_paused = False
        promote_to_oldest()
        gc.enable()
