"""A transcript's wire form, converted once per message and kept between requests.

Every request carries the whole transcript, so converting it (``paired`` and each
message's protocol dicts) and JSON-encoding it again on every step made a step's own
cost grow with the session: by turn 300 of 8 KB tool results, most of a step. Messages
are not changed once appended (compaction replaces them, host/compaction.py), so the
form of the longest unchanged prefix (by identity) of the previous request's messages
is reused and only what follows it is converted. :func:`encode_body` then writes the
body as the SDK's own encoder would (``openapi_dumps``: compact, ``ensure_ascii=False``)
with the kept JSON text of the messages spliced in.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
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

    def __init__(self, convert: Callable[[Message], list[dict[str, Any]]]) -> None:
        self._convert = convert
        self._seen: list[Message] = []
        # Per transcript index: its protocol entries, their JSON (UTF-8, each entry
        # preceded by a comma; b"" for none), and the state paired() has after it (the
        # last message out, and the next message with the results it was missing).
        self._entries: list[list[dict[str, Any]]] = []
        self._texts: list[bytes] = []
        self._after: list[tuple[Message | None, Message | None]] = []

    def __call__(self, messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[bytes]]:
        """The entries of ``paired(messages)`` in order, and their JSON as chunks to
        join: each is ``,`` and one message's entries (see :class:`JsonArray`)."""
        start = max(0, common_prefix(messages, self._seen) - 1)
        del self._seen[start:], self._entries[start:], self._texts[start:], self._after[start:]
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
                    out.append(Message(role="user", parts=missing))
            if out:
                last = out[-1]
            entries = [entry for m in out for entry in self._convert(m)]
            self._seen.append(messages[index])
            self._entries.append(entries)
            self._texts.append("".join("," + _dumps(e) for e in entries).encode())
            self._after.append((last, patched))
        return (list(itertools.chain.from_iterable(self._entries)),
                list(itertools.compress(self._texts, self._texts)))


class JsonArray:
    """A list's JSON text kept as chunks (``,`` and an item's JSON each), for
    :func:`encode_body`: written out in the one join of the whole body."""

    def __init__(self, value: list[Any], chunks: list[bytes]) -> None:
        self.value = value
        self.chunks = chunks

    def pieces(self) -> list[bytes]:
        if not self.chunks:
            return [b"[]"]
        return [b"[", self.chunks[0][1:], *self.chunks[1:], b"]"]


def encode_body(body: dict[str, Any], known: dict[str, JsonArray]) -> bytes:
    """``body`` as JSON bytes, byte for byte what the SDK's ``openapi_dumps`` writes for
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
    return b"".join(pieces)
