"""A message list whose older entries may still be raw journal lines.

Resume must not parse what the next request does not need: a session's full history
holds every message since it began (a 50 MB session is mostly that), while the next
request sends only the transcript since the last compaction. The journal reader
(host/journal.py) keeps each history-only line as a :class:`RawMessage` — its bytes,
unparsed — and the session's history becomes a :class:`MessageLog`, which parses an
entry the first time something reads it (the transcript view, fork, ACP replay).

Everything that reads a ``MessageLog`` sees ``Message`` objects, as in a list: indexing,
slices, iteration, ``reversed``, comparison, ``in``, ``index``, ``count``, ``pop``,
``copy``, ``+``, ``*``, ``repr`` and pickling parse what they hand out. The storage
itself (``list.__iter__(log)``) keeps the placeholder objects, whose identity never
changes: the journal writer compares identities to know what it already saved.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, SupportsIndex, cast, overload

from crystal_kernel.core.messages import Message


class RawMessage:
    """A journal message line not parsed yet: ``data[start:stop]`` (the whole file's
    bytes, shared by every unread line: slicing 50 MB into lines at resume was most of
    its time); :meth:`load` parses it once."""

    __slots__ = ("_data", "_start", "_stop", "_number", "_parse", "_message")

    def __init__(self, data: bytes, start: int, stop: int, number: int, parse: Callable[[bytes, int], Message]):
        self._data: bytes | None = data
        self._start, self._stop, self._number = start, stop, number
        # parse(line, line number): raises UserError naming the journal and line when corrupt.
        self._parse = parse
        self._message: Message | None = None

    def load(self) -> Message:
        """The message (parsed at the first call; the file's bytes are then let go)."""
        if self._message is None:
            assert self._data is not None
            self._message = self._parse(self._data[self._start:self._stop], self._number)
            self._data = None
        return self._message


def _get(item: Any) -> Message:
    return item.load() if type(item) is RawMessage else cast(Message, item)


class MessageLog(list[Message]):
    """A list of ``Message`` where some entries are parsed only when read (see the module)."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: Any) -> Any:
        value = list.__getitem__(self, index)
        if isinstance(index, slice):
            return [_get(v) for v in value]
        return _get(value)

    def __iter__(self) -> Iterator[Message]:
        for item in list.__iter__(self):
            yield _get(item)

    def __reversed__(self) -> Iterator[Message]:
        for item in list.__reversed__(self):
            yield _get(item)

    def messages(self) -> list[Message]:
        """Every entry parsed, as a plain list."""
        return [_get(v) for v in list.__iter__(self)]

    def pop(self, index: SupportsIndex = -1) -> Message:
        return _get(list.pop(self, index))

    def copy(self) -> list[Message]:
        return self.messages()

    def __contains__(self, value: object) -> bool:
        return any(m is value or m == value for m in self)

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize) -> int:
        return self.messages().index(value, start, stop)

    def count(self, value: Any) -> int:
        return self.messages().count(value)

    def remove(self, value: Any) -> None:
        del self[self.index(value)]

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self[:] = sorted(self.messages(), key=key, reverse=reverse)

    def __eq__(self, other: object) -> bool:
        return self.messages() == _plain(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: Any) -> bool:
        return self.messages() < _plain(other)

    def __le__(self, other: Any) -> bool:
        return self.messages() <= _plain(other)

    def __gt__(self, other: Any) -> bool:
        return self.messages() > _plain(other)

    def __ge__(self, other: Any) -> bool:
        return self.messages() >= _plain(other)

    __hash__ = None

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        return self.messages() + _plain(other)

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        return _plain(other) + self.messages()

    def __mul__(self, count: SupportsIndex) -> list[Message]:
        return self.messages() * count

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return repr(self.messages())

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (list, (self.messages(),))


def _plain(other: Any) -> list[Any]:
    if isinstance(other, MessageLog):
        return other.messages()
    return list(other) if isinstance(other, list) else cast(list[Any], other)
