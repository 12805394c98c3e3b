"""BG-1: the ring buffer read by absolute offset — wrap-around, dropped bytes, limits,
UTF-8 boundaries. Pure data structure: no processes needed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.buffer import RingBuffer


def test_bg1_offsets_before_wrap():
    ring = RingBuffer(16)
    ring.append(b"hello ")
    ring.append(b"world")
    chunk = ring.read(0)
    assert (chunk.text, chunk.offset, chunk.next_offset, chunk.dropped, chunk.total) == ("hello world", 0, 11, 0, 11)
    assert ring.read(6).text == "world"
    assert ring.read(11).text == "" and ring.read(11).next_offset == 11


def test_bg1_offsets_across_wrapped_buffer():
    ring = RingBuffer(10)
    ring.append(b"0123456789")
    ring.append(b"abcdef")  # wraps: the buffer now holds 6789abcdef
    assert ring.start == 6 and ring.total == 16
    chunk = ring.read(2)
    assert chunk.text == "6789abcdef"
    assert chunk.offset == 6 and chunk.dropped == 4 and chunk.next_offset == 16
    assert ring.read(8, 4).text == "89ab"
    assert ring.read(None, 3).text == "def"
    assert ring.read().text == "6789abcdef"


def test_bg1_one_write_larger_than_the_buffer():
    ring = RingBuffer(8)
    ring.append(b"xy")
    ring.append(b"ABCDEFGHIJKLMNOP")
    assert ring.read(0).text == "IJKLMNOP"
    assert ring.read(0).dropped == 10
    ring.append(b"qr")
    assert ring.read(ring.start).text == "KLMNOPqr"


def test_bg1_bad_offsets_are_refused_clearly():
    ring = RingBuffer(8)
    ring.append(b"abc")
    with pytest.raises(ToolError, match="past the end of the output \\(3 bytes so far\\)"):
        ring.read(4)
    with pytest.raises(ToolError, match="0 or more"):
        ring.read(-1)
    with pytest.raises(ToolError, match="positive"):
        ring.read(0, 0)


def test_bg1_reads_cut_on_character_boundaries():
    ring = RingBuffer(64)
    ring.append("aé€😀".encode())  # 1 + 2 + 3 + 4 bytes
    first = ring.read(0, 4)  # "aé" is 3 bytes; the 4th byte starts "€"
    assert first.text == "aé" and first.next_offset == 3
    rest = ring.read(first.next_offset)
    assert rest.text == "€😀"
    # Half a character at the end of a running job's output waits for the rest...
    ring.append("ü".encode()[:1])
    held = ring.read(rest.next_offset)
    assert held.text == "" and held.remaining == 1
    # ...and is shown as is once the output is final.
    assert ring.read(rest.next_offset, final=True).text == "\ufffd"


def test_bg1_read_after_a_drop_skips_a_broken_character():
    ring = RingBuffer(5)
    ring.append("ab€xy".encode())  # 7 bytes; the buffer keeps the last 5: b"\x82\xacxy"... minus one
    chunk = ring.read(0)
    assert "\ufffd" not in chunk.text
    assert chunk.text.endswith("xy")
    assert chunk.dropped == 2


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(1, 64),
    chunks=st.lists(st.binary(min_size=0, max_size=100), max_size=20),
    data=st.data(),
)
def test_bg1_any_offset_reads_exactly_the_stream(capacity, chunks, data):
    ring = RingBuffer(capacity)
    stream = b""
    for chunk in chunks:
        ring.append(chunk)
        stream += chunk
    assert ring.total == len(stream)
    offset = data.draw(st.integers(0, len(stream)))
    limit = data.draw(st.one_of(st.none(), st.integers(1, 200)))
    raw, begin, dropped = ring.read_bytes(offset, limit)
    start = max(0, len(stream) - capacity)
    assert begin == max(offset, start)
    assert dropped == max(0, start - offset)
    expected = stream[begin:] if limit is None else stream[begin:begin + limit]
    assert raw == expected


@settings(max_examples=100, deadline=None)
@given(capacity=st.integers(44, 64), text=st.text(max_size=200), step=st.integers(4, 40))
def test_bg1_consecutive_reads_join_into_the_output(capacity, text, step):
    """A reader that keeps up (reads after every write; a write never exceeds the room
    left by a held-back half character) reassembles the exact text."""
    ring = RingBuffer(capacity)
    encoded = text.encode()
    seen, offset = "", 0
    for i in range(0, len(encoded), step):
        ring.append(encoded[i:i + step])
        while True:
            chunk = ring.read(offset)
            assert chunk.dropped == 0
            seen += chunk.text
            if chunk.next_offset == offset:
                break
            offset = chunk.next_offset
    seen += ring.read(offset, final=True).text
    assert seen == text


def _fill(ring: RingBuffer, data: bytes, room: int) -> None:
    """Write like the capture thread: into the writable views, then commit."""
    views = ring.writable(room)
    done = 0
    for view in views:
        take = min(len(view), len(data) - done)
        view[:take] = data[done:done + take]
        done += take
        view.release()
    ring.commit(len(data))


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 40), slack=st.integers(1, 12),
       writes=st.lists(st.tuples(st.booleans(), st.binary(max_size=12)), max_size=30),
       offset=st.integers(0, 400))
def test_bg1_direct_writes_read_back_like_appends(capacity, slack, writes, offset):
    """The capture thread reads straight into the buffer's slack (writable + commit),
    mixed with ordinary appends: every read by offset sees exactly the newest
    ``capacity`` bytes of the stream, and memory stops at capacity + slack."""
    ring = RingBuffer(capacity, slack=slack)
    stream = b""
    for direct, data in writes:
        if direct:
            data = data[:slack]
            _fill(ring, data, slack)
        else:
            ring.append(data)
        stream += data
        held, begin, _ = ring.read_bytes()
        assert begin == max(0, len(stream) - capacity) and held == stream[begin:]
    assert len(ring._buf) <= capacity + slack
    if offset <= len(stream):
        raw, begin, dropped = ring.read_bytes(offset)
        assert raw == stream[max(offset, ring.start):] and dropped == max(0, ring.start - offset)


def test_bg1_space_being_written_is_not_visible_to_readers():
    ring = RingBuffer(4, slack=3)
    ring.append(b"abcd")
    views = ring.writable(3)
    for view in views:
        view[:] = b"#" * len(view)  # a read in progress, not yet committed
    assert ring.read_bytes() == (b"abcd", 0, 0)
    for view in views:
        view.release()
    ring.commit(2)
    assert ring.read_bytes() == (b"cd##", 2, 0)
    with pytest.raises(ValueError):
        ring.writable(4)
