"""A bounded output buffer addressed by absolute byte offsets (BG-1).

Offset 0 is the first byte a job ever wrote; offsets only grow. The buffer keeps the
newest ``capacity`` bytes. A reader asks for an offset and learns what it gets: the
text, the offset the text starts at, the next offset to ask for, and how many bytes it
missed because they were dropped before the buffer's start. So a reader that polls by
offset always knows exactly what it did not see.

Memory grows with the output up to ``capacity`` and then stays there: small jobs cost
little, large ones cost at most ``capacity``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from crystal_kernel.errors import ToolError


@dataclass(frozen=True)
class LogChunk:
    """What one read by offset returns."""

    text: str
    # Absolute offset of the first byte of ``text``.
    offset: int
    # The offset to pass next time to continue exactly after ``text``.
    next_offset: int
    # Bytes between the requested offset and the buffer's start that are gone.
    dropped: int
    # Bytes written so far in all (the end of the output).
    total: int
    # The oldest offset still in the buffer.
    start: int

    @property
    def remaining(self) -> int:
        """Bytes after ``next_offset`` already written (a bounded read stopped early)."""
        return self.total - self.next_offset


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


def _incomplete_tail(data: bytes | bytearray) -> int:
    """How many bytes at the end form an unfinished UTF-8 sequence (0..3)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if _is_continuation(byte):
            continue
        if byte >= 0xF0:
            need = 4
        elif byte >= 0xE0:
            need = 3
        elif byte >= 0xC0:
            need = 2
        else:
            return 0
        return back if back < need else 0
    return 0


class RingBuffer:
    """The newest ``capacity`` bytes of a stream, thread-safe (one writer, many readers)."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._buf = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        """Bytes written so far (the absolute end offset)."""
        return self._total

    @property
    def start(self) -> int:
        """The oldest absolute offset still held."""
        return max(0, self._total - self.capacity)

    def append(self, data: bytes | bytearray | memoryview) -> None:
        size = len(data)
        if not size:
            return
        cap = self.capacity
        with self._lock:
            if size >= cap:
                # Only the newest ``cap`` bytes survive; lay them out so that position
                # (offset % cap) holds offset, like every other write.
                tail = bytes(data[size - cap:])
                if len(self._buf) < cap:
                    self._buf = bytearray(cap)
                end = self._total + size
                pos = (end - cap) % cap
                first = cap - pos
                self._buf[pos:] = tail[:first]
                self._buf[:pos] = tail[first:]
                self._total = end
                return
            if len(self._buf) < cap:
                # Growing phase: the buffer is exactly the output so far.
                room = cap - len(self._buf)
                take = min(room, size)
                self._buf += data[:take]
                self._total += take
                if take == size:
                    return
                data = data[take:]
                size -= take
            pos = self._total % cap
            first = min(size, cap - pos)
            self._buf[pos:pos + first] = data[:first]
            if first < size:
                self._buf[:size - first] = data[first:]
            self._total += size

    def read_bytes(self, offset: int | None = None, limit: int | None = None) -> tuple[bytes, int, int]:
        """Raw bytes from ``offset`` (None: the newest ``limit`` bytes, or everything
        held when ``limit`` is None). Returns ``(data, start_offset, dropped)``."""
        if limit is not None and limit <= 0:
            raise ToolError(f"The limit must be a positive number of bytes, not {limit}.")
        if offset is not None and offset < 0:
            raise ToolError(f"The offset must be 0 or more, not {offset}.")
        with self._lock:
            total = self._total
            start = max(0, total - self.capacity)
            if offset is None:
                offset = start if limit is None else max(start, total - limit)
            if offset > total:
                raise ToolError(f"Offset {offset} is past the end of the output ({total} bytes so far).")
            dropped = max(0, start - offset)
            begin = max(offset, start)
            count = total - begin if limit is None else min(limit, total - begin)
            if count <= 0:
                return b"", begin, dropped
            cap = self.capacity
            pos = begin % cap
            if pos + count <= len(self._buf):
                data = bytes(self._buf[pos:pos + count])
            else:
                first = len(self._buf) - pos
                data = bytes(self._buf[pos:]) + bytes(self._buf[:count - first])
        return data, begin, dropped

    def read(self, offset: int | None = None, limit: int | None = None, *, final: bool = False) -> LogChunk:
        """Text from ``offset`` (see :meth:`read_bytes`), cut on UTF-8 character
        boundaries so that consecutive reads join into the exact output. ``final`` says
        the stream has ended, so an unfinished character at the very end is shown as is."""
        data, begin, dropped = self.read_bytes(offset, limit)
        # A read that starts inside a character (after a drop) skips its tail bytes.
        skip = 0
        while skip < min(3, len(data)) and _is_continuation(data[skip]) and (dropped or begin > 0):
            skip += 1
        if skip:
            data = data[skip:]
            begin += skip
        end_cut = 0
        if not (final and begin + len(data) == self._total):
            end_cut = _incomplete_tail(data)
            if end_cut and end_cut == len(data) and limit is not None and limit < 4:
                end_cut = 0  # a tiny limit must still make progress
        if end_cut:
            data = data[:-end_cut]
        text = data.decode("utf-8", errors="replace")
        total = self._total
        return LogChunk(text=text, offset=begin, next_offset=begin + len(data), dropped=dropped,
                        total=total, start=max(0, total - self.capacity))
