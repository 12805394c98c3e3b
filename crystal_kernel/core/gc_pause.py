"""Garbage collection paused while a bulk of long-lived objects is built.

Resuming a session builds every message of its journal as objects that all stay alive
(a 50 MiB journal: ~26,000 messages, several hundred thousand tracked objects). Each
batch of new objects starts a collection, and as they pile up the full collections
come again and again over a heap that only grows, none of them finding garbage:
measured, resume of a 50 MiB session took twice as long with the collector on (docs/benchmarks.md).
Parsing makes no reference cycles, so nothing is lost by collecting once afterwards,
when the collector's own schedule next runs.
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
    parse), since other threads' cyclic garbage also waits until it ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
