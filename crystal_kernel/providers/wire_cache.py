"""A transcript's wire form, converted once per message and kept between requests.

Every request carries the whole transcript, so converting it (``paired`` and each
message's protocol dicts) and JSON-encoding it again on every step made a step's own
cost grow with the session: by turn 300 of 8 KB tool results, most of a step. Messages
are not changed once appended (compaction replaces them, host/compaction.py), so the
form of the longest unchanged prefix (by identity) of the previous request's messages
is reused and only what follows it is converted. :func:`encode_body` then writes the
body as the SDK's own encoder would (``openapi_dumps``: compact, ``ensure_ascii=False``)
with the kept JSON text of the messages spliced in, as a :class:`Body`: the pieces of
that text, sent as they are, never joined into one object the size of the transcript.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from crystal_kernel.core.messages import Message, ToolResultPart
from crystal_kernel.core.prefix import common_prefix
from crystal_kernel.providers.common import missing_results, orphan_results_dropped

# The SDK's encoder settings (openai/_utils/_json.py, the same as httpx's).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def to_json(value: Any) -> str:
    """``value`` as JSON text, as the SDK encodes request bodies."""
    return _dumps(value)


class PairedWire:
    """:func:`providers.common.paired` and ``convert`` over a transcript, kept per
    message: a call reconverts from the first message that differs from the previous
    call's (one before it: an assistant's missing results depend on what follows it).

    ``convert(message)`` returns the message's protocol entries (dicts), which must not
    be changed afterwards: they are reused for every later request.
    """

    # The messages' JSON is also kept joined in blocks of at least this many bytes (a
    # message's text is in one block, whole): a request sends the blocks as they are and
    # only the messages after the last one as pieces of their own (see :class:`Body`).
    BLOCK = 1 << 18

    def __init__(self, convert: Callable[[Message], list[dict[str, Any]]]) -> None:
        self._convert = convert
        self._seen: list[Message] = []
        # Every entry of the messages seen, in order, and the JSON of each message that
        # has entries (UTF-8, each entry preceded by a comma); per transcript index, the
        # length of both lists after it and the state paired() has after it (the last
        # message out, and the next message with the results it was missing). Kept flat
        # so that a request costs what it adds, not one walk over the whole transcript.
        self._entries: list[dict[str, Any]] = []
        self._texts: list[bytes] = []
        self._ends: list[tuple[int, int]] = []
        self._after: list[tuple[Message | None, Message | None]] = []
        # The blocks, the number of texts each ends after, and the size of the texts
        # after the last block.
        self._blocks: list[bytes] = []
        self._block_ends: list[int] = []
        self._open = 0

    def __call__(self, messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[bytes]]:
        """The entries of ``paired(messages)`` in order, and their JSON as chunks to
        join: each is ``,`` and the entries of one message, or of a block of them (see
        :class:`JsonArray`)."""
        start = max(0, common_prefix(messages, self._seen) - 1)
        entries_end, texts_end = self._ends[start - 1] if start else (0, 0)
        del self._seen[start:], self._ends[start:], self._after[start:]
        if texts_end < len(self._texts):
            while self._block_ends and self._block_ends[-1] > texts_end:
                del self._blocks[-1], self._block_ends[-1]
            self._open = sum(map(len, self._texts[self._sealed():texts_end]))
        del self._entries[entries_end:], self._texts[texts_end:]
        last, patched = self._after[-1] if self._after else (None, None)
        for index in range(start, len(messages)):
            message = patched if patched is not None else messages[index]
            patched = None
            out: list[Message] = []
            if message.role == "user":
                message = orphan_results_dropped(message, last)
                if message.parts:
                    out.append(message)
            else:
                out.append(message)
                following = messages[index + 1] if index + 1 < len(messages) else None
                if following is not None and following.role != "user":
                    following = None
                missing: list[ToolResultPart] = missing_results(message, following)
                if missing and following is not None:
                    patched = following.model_copy(update={"parts": [*missing, *following.parts]})
                elif missing:
                    out.append(Message(role="user", parts=[*missing]))
            if out:
                last = out[-1]
            entries = [entry for m in out for entry in self._convert(m)]
            self._seen.append(messages[index])
            if entries:
                self._entries += entries
                text = "".join("," + _dumps(e) for e in entries).encode()
                self._texts.append(text)
                self._open += len(text)
                if self._open >= self.BLOCK:
                    self._blocks.append(b"".join(self._texts[self._sealed():]))
                    self._block_ends.append(len(self._texts))
                    self._open = 0
            self._ends.append((len(self._entries), len(self._texts)))
            self._after.append((last, patched))
        # Copies: a body holds its lists while the next request changes the kept ones.
        return self._entries.copy(), [*self._blocks, *self._texts[self._sealed():]]

    def _sealed(self) -> int:
        """How many texts the blocks hold."""
        return self._block_ends[-1] if self._block_ends else 0


class JsonArray:
    """A list's JSON text kept as chunks (``,`` and an item's JSON each), for
    :func:`encode_body`: pieces of the body as they are."""

    def __init__(self, value: list[Any], chunks: list[bytes]) -> None:
        self.value = value
        self.chunks = chunks

    def pieces(self) -> list[bytes]:
        if not self.chunks:
            return [b"[]"]
        return [b"[", self.chunks[0][1:], *self.chunks[1:], b"]"]


class Body:
    """A request body's JSON text as its pieces (the kept JSON of the messages among
    them, most in :class:`PairedWire`'s blocks), posted as they are: the transport reads
    it in writes of about :attr:`CHUNK` bytes, small pieces gathered, large ones (the
    blocks) passed whole. Joining the whole body first copied the transcript into a new
    object on every request (~2.7 MB by turn 300 of 8 KB results), in memory fresh from
    the system each time, since each body is larger than the last: most of what a late
    step's own work had added.

    ``bytes(body)`` is the whole text. Iterating it again sends it again (a retry)."""

    CHUNK = 1 << 18

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.length = sum(map(len, pieces))

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)

    def __len__(self) -> int:
        return self.length

    def chunks(self) -> Iterator[bytes]:
        """The text in order, in chunks of about :attr:`CHUNK` bytes."""
        group: list[bytes] = []
        size = 0
        for piece in self.pieces:
            if len(piece) >= self.CHUNK:
                if group:
                    yield b"".join(group)
                    group, size = [], 0
                yield piece
                continue
            group.append(piece)
            size += len(piece)
            if size >= self.CHUNK:
                yield b"".join(group)
                group, size = [], 0
        if group:
            yield b"".join(group)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks():
            yield chunk


def encode_body(body: dict[str, Any], known: dict[str, JsonArray]) -> Body:
    """``body`` as JSON text, byte for byte what the SDK's ``openapi_dumps`` writes for
    it; ``known[key]`` gives the JSON of ``body[key]`` when that is its very list."""
    pieces: list[bytes] = []
    for key, value in body.items():
        pieces.append((("," if pieces else "{") + _dumps(key) + ":").encode())
        hit = known.get(key)
        if hit is not None and hit.value is value:
            pieces.extend(hit.pieces())
        else:
            pieces.append(_dumps(value).encode())
    pieces.append(b"}" if pieces else b"{}")
    return Body(pieces)
