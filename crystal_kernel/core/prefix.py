"""Work over a list kept for the prefix it shares with the list of the previous call.

A session's transcript only grows between two requests (compaction replaces it whole),
and its messages are not changed once appended: what was computed over the previous
request's messages holds for the longest prefix (by identity) the next one shares.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share, by identity (at C speed)."""
    first_difference = next(itertools.compress(itertools.count(), map(operator.is_not, a, b)), None)
    return min(len(a), len(b)) if first_difference is None else first_difference


class PrefixFold:
    """``step`` folded over a list from ``initial``, kept for the longest prefix (by
    identity) the list shares with the previous call's: a transcript's total grows by
    its new messages only. ``step(total, item)`` may raise; the item is then not kept."""

    def __init__(self, step: Callable[[Any, Any], Any], initial: Any) -> None:
        self._step = step
        self._seen: list[Any] = []
        self._totals: list[Any] = [initial]

    def __call__(self, items: Sequence[Any]) -> Any:
        keep = common_prefix(items, self._seen)
        del self._seen[keep:], self._totals[keep + 1:]
        total = self._totals[-1]
        for item in items[keep:]:
            total = self._step(total, item)
            self._seen.append(item)
            self._totals.append(total)
        return total
