"""Asyncio streams over the protocol's file descriptors, whatever they are.

An ACP client connects pipes (or a socket, or a terminal), which asyncio's pipe
transports can watch. ``crystal acp < requests.jsonl > replies.jsonl`` hands the agent
regular files instead, which an event loop cannot poll; those get a thread that does the
blocking reads or writes. Both directions are bounded: the reader thread pauses when the
stream's buffer is full, the writer pauses the protocol when too much is queued.

Every line of input is checked before the protocol library reads it (:func:`check_line`):
one that is not a JSON object, nests too deep or is longer than the limit is answered
with its JSON-RPC error here and skipped, so that no client input can end the receive
loop, make it hold a line without bound, or glue the next request to a bad line.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsIndex

from crystal_kernel.core.textsafe import clean_value, nesting_depth

if TYPE_CHECKING:
    from asyncio.streams import _ReaduntilBuffer  # typeshed's name for what readuntil takes

READ_CHUNK = 64 * 1024
# Writer flow control: pause the protocol above HIGH queued bytes, resume below LOW.
WRITE_HIGH = 1024 * 1024
WRITE_LOW = 256 * 1024
# How long closing waits for queued output to reach a slow file.
FLUSH_SECONDS = 30.0
# While shutting down: output that has not moved for this long is dropped (the client
# stopped reading); how often that is looked at.
STALL_SECONDS = 10.0
STALL_CHECK_SECONDS = 0.5


def pollable(fd: int) -> bool:
    """Whether the event loop can watch this descriptor: a pipe, a socket or a terminal.
    Regular files, block devices and other character devices (``/dev/null`` cannot be
    registered with epoll) need a thread."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class _ThreadReadTransport(asyncio.ReadTransport):
    """Reads ``fd`` in a daemon thread and feeds the stream reader; the reader's flow
    control (pause at twice its limit) stops the thread between chunks."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, reader: asyncio.StreamReader):
        super().__init__()
        self._loop = loop
        self._fd = fd
        self._reader = reader
        self._running = threading.Event()
        self._running.set()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="crystal-acp-stdin", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._closing:
                self._running.wait()
                if self._closing:
                    break
                data = os.read(self._fd, READ_CHUNK)
                if not data:
                    break
                self._loop.call_soon_threadsafe(self._reader.feed_data, data)
        except (OSError, RuntimeError):
            pass  # a read error ends the input like EOF; a closed loop has nobody to tell
        finally:
            try:
                self._loop.call_soon_threadsafe(self._reader.feed_eof)
            except RuntimeError:
                pass
            os.close(self._fd)

    def pause_reading(self) -> None:
        self._running.clear()

    def resume_reading(self) -> None:
        self._running.set()

    def is_reading(self) -> bool:
        return self._running.is_set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        # The thread may be blocked in read(); it ends at the next chunk or EOF.
        self._closing = True
        self._running.set()


class _ThreadWriteTransport(asyncio.WriteTransport):
    """Writes to ``fd`` from a thread, in order; ``close`` lets queued bytes reach the
    file first and :meth:`flushed` waits for that."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, protocol: asyncio.BaseProtocol):
        super().__init__()
        self._loop = loop
        self._fd = fd
        self._protocol = protocol
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._buffered = 0
        self._paused = False
        self._closing = False
        self._done = loop.create_future()
        self._thread = threading.Thread(target=self._run, name="crystal-acp-stdout", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failed = False
        try:
            while True:
                data = self._queue.get()
                if data is None:
                    break
                if not failed:
                    try:
                        view = memoryview(data)
                        while view:
                            view = view[os.write(self._fd, view):]
                    except OSError:
                        failed = True  # the file is gone; later output is dropped
                with self._lock:
                    self._buffered -= len(data)
                    resume = self._paused and self._buffered <= WRITE_LOW
                    if resume:
                        self._paused = False
                if resume:
                    self._call(self._protocol.resume_writing)
        finally:
            os.close(self._fd)
            self._call(self._finish)

    def _call(self, callback: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(callback)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    def _finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        data = bytes(data)
        with self._lock:
            self._buffered += len(data)
            pause = not self._paused and self._buffered > WRITE_HIGH
            if pause:
                self._paused = True
        self._queue.put(data)
        if pause:
            self._protocol.pause_writing()

    def get_write_buffer_size(self) -> int:
        return self._buffered

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._queue.put(None)

    def abort(self) -> None:
        self.close()

    async def flushed(self) -> None:
        """Wait (bounded) until everything written so far is in the file."""
        self.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._done), FLUSH_SECONDS)
        except asyncio.TimeoutError:
            pass


class InputReader(asyncio.StreamReader):
    """A stream reader that holds back the end of input: when the input ends, the
    callback given to :meth:`on_end` runs instead, and readers see EOF only after
    :meth:`release_eof`. The agent uses the pause to answer requests it already read."""

    def __init__(self, limit: int):
        super().__init__(limit=limit)
        self.limit = limit
        self._ended = False
        self._released = False
        self._line_open = False
        self._on_end: Callable[[], None] | None = None
        # Set when a read left no whole line unread (see lines_read).
        self._drained = asyncio.Event()
        # Called with the error a line earns when it is not a request (check_line).
        self._on_bad_line: Callable[[BadLine], None] | None = None

    async def readuntil(self, separator: _ReaduntilBuffer = b"\n") -> bytes:
        try:
            while True:
                try:
                    line = await super().readuntil(separator)
                except asyncio.LimitOverrunError as exc:
                    if self._on_bad_line is None:
                        raise
                    # The protocol library would join the pieces of a line without end
                    # (memory without bound) and then the next request to it: drop it.
                    await self._skip_line(exc.consumed, separator)
                    self._on_bad_line(too_long(self.limit))
                    continue
                if self._on_bad_line is None:
                    return line
                line, bad = check_line(line)
                if bad is None:
                    return line
                # Answered here, once, with the JSON-RPC error; the protocol library
                # would log a traceback and answer nothing (or stop reading at all).
                self._on_bad_line(bad)
        finally:
            if not self.unread_lines():
                self._drained.set()

    async def _skip_line(self, consumed: int, separator: _ReaduntilBuffer) -> None:
        """Drop an overlong line, piece by piece, up to and including its end."""
        await self.readexactly(consumed)
        while True:
            try:
                await super().readuntil(separator)
                return
            except asyncio.LimitOverrunError as exc:
                await self.readexactly(exc.consumed)

    def on_bad_line(self, callback: Callable[[BadLine], None]) -> None:
        """Hand lines that are not requests the protocol library can take to
        ``callback`` instead of the reader's caller, with the JSON-RPC error they earn
        (:func:`check_line`; a line longer than the limit, :func:`too_long`)."""
        self._on_bad_line = callback

    async def lines_read(self) -> None:
        """Wait until every whole line received so far has been read."""
        while self.unread_lines():
            self._drained.clear()
            await self._drained.wait()

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if isinstance(data, (bytes, bytearray)) and data:  # what the transport hands over
            self._line_open = not data.endswith(b"\n")
        super().feed_data(data)

    def feed_eof(self) -> None:
        if self._released:
            super().feed_eof()
        elif not self._ended:
            self._ended = True
            if self._line_open:
                # The last request lacks its newline: complete it, so that it is read
                # (and answered) before readers see the end of input.
                super().feed_data(b"\n")
            if self._on_end is not None:
                self._on_end()

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the input ends (now, if it already has)."""
        self._on_end = callback
        if self._ended:
            callback()

    def unread_lines(self) -> bool:
        """Whether a whole line is still waiting to be read."""
        # StreamReader keeps its unread bytes in ``_buffer`` (every CPython since 3.4).
        return b"\n" in getattr(self, "_buffer", b"")

    def release_eof(self) -> None:
        """Let readers see the end of input (now, or when it comes if it has not yet)."""
        self._released = True
        if self._ended:
            super().feed_eof()


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# Deepest nesting a message may have: ACP's own messages nest less than 10 levels, and
# copying or validating a message nested a few hundred deep overflows Python's stack.
MAX_DEPTH = 64


@dataclass(frozen=True)
class BadLine:
    """A line of input that is not a request, and the JSON-RPC error that answers it."""

    code: int
    kind: str  # JSON-RPC's name for the code: "Parse error", "Invalid Request"
    why: str  # completes "a line of input ..." in the line on stderr
    detail: str = ""  # said after the kind in the answer's message
    id: Any = None  # the request's id, when it could be read

    @property
    def message(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


def too_long(limit: int) -> BadLine:
    """The answer to a line longer than the reader's limit (it is skipped unread)."""
    size = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
    return BadLine(INVALID_REQUEST, "Invalid Request", f"is longer than {size}",
                   f"the line is longer than {size}, the agent's limit; it was skipped.")


def check_line(line: bytes) -> tuple[bytes, BadLine | None]:
    """The line to hand on, or the error it earns: -32700 (parse error) for text that is
    not JSON, -32600 (invalid request) for JSON that is not an object or that nests
    deeper than :data:`MAX_DEPTH`. A blank line passes. Lone surrogates (``"\\ud800"``,
    which UTF-8 cannot encode and so no file, log or model request can hold) become
    visible escapes, once, here (ROBUST-1)."""
    text = line.strip()
    if not text:
        return line, None
    try:
        message = json.loads(text)
    except RecursionError:
        return line, _too_deep(None)
    except ValueError:  # JSONDecodeError, and UnicodeDecodeError for bytes not UTF-8
        return line, BadLine(PARSE_ERROR, "Parse error", "is not JSON")
    if not isinstance(message, dict):
        return line, BadLine(INVALID_REQUEST, "Invalid Request", "is not a JSON object")
    # Fewer brackets than the limit cannot nest deeper (a cheap count spares walking a
    # large flat array element by element).
    if text.count(b"[") + text.count(b"{") > MAX_DEPTH and nesting_depth(message, stop_at=MAX_DEPTH) > MAX_DEPTH:
        request_id = message.get("id") if "method" in message else None  # a request's, not a response's
        return line, _too_deep(request_id if isinstance(request_id, (str, int)) else None)
    if b"\\ud" in text or b"\\uD" in text:  # a \u escape of a surrogate, paired or not
        cleaned = clean_value(message)
        if cleaned != message:
            return (json.dumps(cleaned) + "\n").encode(), None
    return line, None


def _too_deep(request_id: Any) -> BadLine:
    return BadLine(INVALID_REQUEST, "Invalid Request", f"nests deeper than {MAX_DEPTH} levels",
                   f"the message nests deeper than {MAX_DEPTH} levels.", request_id)


async def open_streams(in_fd: int, out_fd: int, limit: int) -> tuple[InputReader, asyncio.StreamWriter]:
    """A stream reader over ``in_fd`` and a stream writer over ``out_fd`` (both owned from
    here on). Pipes, sockets and terminals use the loop's pipe transports; anything else
    (a regular file) a thread."""
    loop = asyncio.get_running_loop()
    reader = InputReader(limit=limit)
    if pollable(in_fd):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0))
    else:
        reader.set_transport(_ThreadReadTransport(loop, in_fd, reader))
    if pollable(out_fd):
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(out_fd, "wb", 0))
    else:
        protocol = asyncio.streams.FlowControlMixin(loop)
        transport = _ThreadWriteTransport(loop, out_fd, protocol)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close the writer after everything queued reached its file or pipe (bounded)."""
    transport = writer.transport
    if isinstance(transport, _ThreadWriteTransport):
        await transport.flushed()
        return
    try:
        await asyncio.wait_for(writer.drain(), FLUSH_SECONDS)
    except (asyncio.TimeoutError, ConnectionError, OSError):
        pass
    writer.close()


async def drop_stuck_output(writer: asyncio.StreamWriter, seconds: float = STALL_SECONDS) -> int:
    """Run while the agent shuts down: when queued output has not moved for ``seconds``
    (a client that stopped reading, its pipe full), abort the output so that the
    shutdown, which waits for that output, ends. Returns the bytes dropped (after
    aborting; runs until cancelled otherwise)."""
    transport = writer.transport
    last, still = -1, 0.0
    while True:
        await asyncio.sleep(STALL_CHECK_SECONDS)
        size = transport.get_write_buffer_size()
        if size == 0 or size != last:
            last, still = size, 0.0
            continue
        still += STALL_CHECK_SECONDS
        if still >= seconds:
            transport.abort()
            return size
