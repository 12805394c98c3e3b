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

from crystal_kernel.core.errors import ToolError


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
    """The newest ``capacity`` bytes of a stream, thread-safe (one writer, many readers).

    ``slack`` extra bytes let the writer read straight into the buffer (see
    :meth:`writable`): the space for the next ``slack`` bytes never overlaps what
    readers may still be handed, so the writer fills it without holding the lock and
    the job's output is copied once (pipe to buffer) instead of twice.
    """

    def __init__(self, capacity: int, slack: int = 0) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        if slack < 0:
            raise ValueError("slack must be 0 or more")
        self.capacity = capacity
        self.slack = slack
        # Position of absolute offset N is N % _size.
        self._size = capacity + slack
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

    def _grow(self, end: int) -> None:
        """Make room up to absolute offset ``end`` (call with the lock held): memory
        grows with the output and stops at ``capacity + slack``."""
        need = min(self._size, end)
        if len(self._buf) < need:
            self._buf += bytes(need - len(self._buf))

    def append(self, data: bytes | bytearray | memoryview) -> None:
        size = len(data)
        if not size:
            return
        ring = self._size
        with self._lock:
            end = self._total + size
            if size > ring:
                # Only the newest bytes can survive; lay them out at their positions.
                data = memoryview(data)[size - ring:]
            self._grow(end)
            length = len(data)
            pos = (end - length) % ring
            first = min(length, ring - pos)
            self._buf[pos:pos + first] = data[:first]
            if first < length:
                self._buf[:length - first] = data[first:]
            self._total = end

    def writable(self, size: int) -> list[memoryview]:
        """Views of the space for the next ``size`` bytes (at most ``slack``), for the
        writer to fill directly (``os.readv(fd, views)``) and then :meth:`commit`.
        Readers never see that space before the commit. Release the views (or drop
        them) before the next call: the buffer cannot grow while they exist."""
        if not 0 < size <= self.slack:
            raise ValueError(f"size must be between 1 and the slack ({self.slack})")
        with self._lock:
            self._grow(self._total + size)
            ring = self._size
            pos = self._total % ring
            view = memoryview(self._buf)
        first = min(size, ring - pos)
        views = [view[pos:pos + first]]
        if first < size:
            views.append(view[:size - first])
        view.release()
        return views

    def commit(self, count: int) -> None:
        """Publish ``count`` bytes the writer put into the :meth:`writable` space."""
        if count < 0 or count > self.slack:
            raise ValueError(f"cannot commit {count} bytes")
        with self._lock:
            self._total += count

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
            pos = begin % self._size
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
