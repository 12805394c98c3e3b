"""Cassettes: record live model replies, and replay them offline (provider ``replay``).

A cassette is a readable JSON file, by default ``<workspace>/.crystal/cassettes/default.json``
(config key ``cassette`` or ``$CRYSTAL_CASSETTE`` names another; a relative path is taken
from the workspace)::

    {"version": 1,
     "interactions": [
       {"match": {"purpose": "turn", "tools": ["bash", "read"],
                  "messages": [{"role": "user", "parts": [{"text": "Say hi"}]}]},
        "reply": [{"text": "Hi!"}, {"tool_call": {"id": "c1", "name": "bash", "arguments": {"command": "ls"}}},
                  {"usage": {"input_tokens": 10, "output_tokens": 3}}, {"finish": "tool_use"}]}]}

A reply may hold reasoning before the text it precedes: ``{"reasoning": {"text": "…",
"provider": "anthropic", "signature": "…"}}`` (or ``"encrypted"``, ``"id"`` and
``"redacted": true``, as the provider produced them), and usage may hold
``reasoning_tokens``. Replayed, the signatures and encrypted items land in the transcript
exactly as a live reply would put them there.

What is matched (only the keys present in ``match``; an empty match accepts any request):

- ``messages``: the whole transcript, message by message: role, text (exact), images
  (MIME type only), tool calls (name and arguments), tool results (name and ok). Tool
  result *text* is not matched: it holds dates, timings and paths that differ between a
  recording and its replay, and the replies are served in order anyway.
- ``user``: the text of the newest user message that has text (handy by hand).
- ``tools``: every tool named must still be offered (new tools may be added).
- ``purpose``: turn, review, compaction, topic, image; an entry without one is a turn
  reply, so hand-written cassettes need not script the side calls (topic naming, ...):
  such a request with no recorded reply fails alone, without using up a turn reply.

The system text is never matched: it carries the date, time and machine paths.
Interactions are served in order; when the next one does not match, a later unused one
that matches is served (a resumed session replays from its middle); when none does,
the error names the first difference against the next one. Keys other than ``match``
and ``reply`` (such as ``person``: recorded question answers) are kept on every rewrite.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from crystal_kernel.core import paths
from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import ProviderError, UserError
from crystal_kernel.core.fsutil import atomic_write_json, open_folder_inside
from crystal_kernel.core.messages import ImagePart, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.secrets import redact
from crystal_kernel.providers.base import (
    Capabilities,
    Finished,
    ModelRequest,
    Provider,
    ReasoningChunk,
    ReasoningItem,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

VERSION = 1
_write_lock = threading.Lock()


def cassette_path(config: Config, workspace: Path) -> Path:
    """``$CRYSTAL_CASSETTE``, else config ``cassette``, else the default; relative to the workspace."""
    named = os.environ.get("CRYSTAL_CASSETTE") or config.raw.get("cassette")
    if named and not isinstance(named, str):
        raise UserError(f"Config key 'cassette' must be a path, not {named!r}.")
    path = Path(named).expanduser() if named else paths.default_cassette()
    return path if path.is_absolute() else Path(workspace) / path


def normalize(request: ModelRequest) -> dict[str, Any]:
    """The matched form of a request (see the module docstring)."""
    messages = []
    for message in request.messages:
        parts: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append({"text": part.text})
            elif isinstance(part, ImagePart):
                parts.append({"image": part.mime_type})
            elif isinstance(part, ToolCallPart):
                arguments: Any = part.raw_arguments if part.raw_arguments is not None else part.arguments
                parts.append({"tool_call": {"name": part.name, "arguments": arguments}})
            elif isinstance(part, ToolResultPart):
                parts.append({"tool_result": {"name": part.name, "ok": part.ok}})
        messages.append({"role": message.role, "parts": parts})
    return {"purpose": request.purpose, "tools": sorted(t.name for t in request.tools), "messages": messages}


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last_user_text(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        texts = [p["text"] for p in message["parts"] if "text" in p]
        if message["role"] == "user" and texts:
            return "".join(texts)
    return None


def difference(match: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """The first way ``actual`` differs from ``match``, in words; None when it matches."""
    expected_purpose = match.get("purpose", "turn")
    if expected_purpose != actual["purpose"]:
        return f"purpose differs: expected '{expected_purpose}' got '{actual['purpose']}'"
    for name in match.get("tools", []):
        if name not in actual["tools"]:
            return f"tool '{name}' was offered when recorded but is not offered now"
    if "user" in match:
        got = _last_user_text(actual["messages"])
        if (got or "").strip() != str(match["user"]).strip():
            return f"the user's text differs: expected '{_short(match['user'])}' got '{_short(got or '')}'"
    if "messages" in match:
        return _messages_difference(match["messages"], actual["messages"])
    return None


def _messages_difference(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> str | None:
    for n, (want, have) in enumerate(zip(expected, got), start=1):
        if want.get("role") != have["role"]:
            return f"message {n} role differs: expected '{want.get('role')}' got '{have['role']}'"
        want_parts, have_parts = want.get("parts", []), have["parts"]
        for m, (a, b) in enumerate(zip(want_parts, have_parts), start=1):
            kind_a, kind_b = next(iter(a), "?"), next(iter(b), "?")
            label = f"message {n}" + (f" part {m}" if len(want_parts) > 1 else "")
            if kind_a != kind_b:
                return f"{label} differs: expected a {kind_a.replace('_', ' ')} got a {kind_b.replace('_', ' ')}"
            if kind_a == "text" and a["text"].strip() != b["text"].strip():
                return f"{label} text differs: expected '{_short(a['text'])}' got '{_short(b['text'])}'"
            if kind_a == "image" and a["image"] != b["image"]:
                return f"{label} image type differs: expected '{a['image']}' got '{b['image']}'"
            if kind_a in ("tool_call", "tool_result"):
                for key in ("name", "arguments", "ok"):
                    if key in a[kind_a] and a[kind_a][key] != b[kind_a].get(key):
                        what = kind_a.replace("_", " ")
                        verb = "differ" if key == "arguments" else "differs"
                        return (f"{label} {what} {key} {verb}: expected '{_short(a[kind_a][key])}' "
                                f"got '{_short(b[kind_a].get(key))}'")
        if len(want_parts) != len(have_parts):
            return f"message {n} has {len(have_parts)} parts, the recording {len(want_parts)}"
    if len(expected) != len(got):
        return f"the request has {len(got)} messages, the recording {len(expected)}"
    return None


def load_cassette(path: Path) -> dict[str, Any]:
    """Read and check a cassette; ProviderError (one line) when missing or malformed."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProviderError(
            f"No model is connected: the provider is replay (recorded replies) and the cassette {path} "
            "does not exist. Connect a model: /model openai:gpt-4.1 in a notebook, --provider on the "
            "command line, or provider in config.json, with its API key variable set (docs/models.md); "
            "or name a cassette with CRYSTAL_CASSETTE.") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ProviderError(f"Replay cassette {path} cannot be read: {exc}.") from None
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise ProviderError(f"Replay cassette {path} must be an object with an \"interactions\" list.")
    if data.get("version", VERSION) != VERSION:
        raise ProviderError(f"Replay cassette {path} has version {data.get('version')!r}; this host reads {VERSION}.")
    for n, entry in enumerate(data["interactions"], start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("reply"), list):
            raise ProviderError(f"Replay cassette {path}: interaction {n} needs a \"reply\" list.")
    return data


def _pieces(text: str) -> list[str]:
    """Pieces of about three words, whitespace kept, so fronts see it stream."""
    words = re.findall(r"\S+\s*|\s+", text)
    return ["".join(words[i:i + 3]) for i in range(0, len(words), 3)]


def _reasoning_items(entry: dict[str, Any]) -> list[StreamItem]:
    thought = entry["reasoning"]
    if isinstance(thought, str):
        thought = {"text": thought}
    items: list[StreamItem] = [ReasoningChunk(p) for p in _pieces(str(thought.get("text") or ""))]
    if thought.get("provider"):
        items.append(ReasoningItem(provider=str(thought["provider"]), signature=thought.get("signature"),
                                   encrypted=thought.get("encrypted"), id=thought.get("id"),
                                   redacted=bool(thought.get("redacted"))))
    return items


def reply_items(reply: list[dict[str, Any]], tag: str) -> list[StreamItem]:
    """Cassette reply entries -> stream items (text split into small chunks)."""
    items: list[StreamItem] = []
    calls = 0
    finish: str | None = None
    for entry in reply:
        if "reasoning" in entry:
            items.extend(_reasoning_items(entry))
        elif "text" in entry:
            items.extend(TextChunk(p) for p in _pieces(str(entry["text"])))
        elif "tool_call" in entry:
            call = entry["tool_call"]
            calls += 1
            arguments = call.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            items.append(ToolCallChunk(id=str(call.get("id") or f"{tag}_{calls}"), name=str(call["name"]),
                                       arguments=raw))
        elif "usage" in entry:
            usage = entry["usage"]
            items.append(UsageChunk(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)),
                                    int(usage.get("reasoning_tokens", 0))))
        elif "finish" in entry:
            finish = str(entry["finish"])
    items.append(Finished(finish or ("tool_use" if calls else "end_turn")))
    return items


class ReplayProvider:
    """Serves recorded replies; tools still run for real."""

    name = "replay"

    def __init__(self, path: Path, *, model: str = "replay", capabilities: Capabilities | None = None) -> None:
        self.path = Path(path)
        self.model = model
        self.capabilities = capabilities or Capabilities()
        self._data: dict[str, Any] | None = None
        self._used: set[int] = set()
        self._next = 0
        #: The interaction served last (extra keys such as ``person`` are there).
        self.last_interaction: dict[str, Any] | None = None

    def _pick(self, request: ModelRequest) -> tuple[int, dict[str, Any]]:
        if self._data is None:
            self._data = load_cassette(self.path)
        interactions: list[dict[str, Any]] = self._data["interactions"]
        actual = normalize(request)
        order = [self._next] + [i for i in range(len(interactions)) if i != self._next and i not in self._used]
        for index in order:
            if index < len(interactions) and difference(interactions[index].get("match", {}), actual) is None:
                return index, interactions[index]
        if request.purpose != "turn":
            # Side calls (topic, review, ...) a cassette did not record must not use up or
            # mismatch the turn replies; their callers treat this as a failed side call.
            raise ProviderError(f"Replay cassette {self.path.name} holds no recorded reply for this "
                                f"{request.purpose} request.")
        if self._next >= len(interactions):
            raise ProviderError(f"Replay cassette {self.path.name} has no reply left for this request "
                                f"(it holds {len(interactions)} interactions, all served).")
        why = difference(interactions[self._next].get("match", {}), actual)
        raise ProviderError(f"Replay mismatch at interaction {self._next + 1}: {why}.")

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        index, interaction = self._pick(request)
        self._used.add(index)
        self._next = index + 1
        self.last_interaction = interaction
        for item in reply_items(interaction["reply"], f"replay_{index + 1}"):
            yield item
            await asyncio.sleep(0)  # let the consumer render and cancellation land

    async def aclose(self) -> None:
        return None


def _reply_entries(items: list[StreamItem]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    thought: dict[str, Any] | None = None  # the reasoning entry still receiving pieces
    for item in items:
        if isinstance(item, ReasoningChunk):
            if thought is None:
                thought = {"text": ""}
                entries.append({"reasoning": thought})
            thought["text"] += item.text
            continue
        if isinstance(item, ReasoningItem):
            if thought is None:
                thought = {"text": item.text}
                entries.append({"reasoning": thought})
            elif item.text and not thought["text"]:
                thought["text"] = item.text
            thought["provider"] = item.provider
            for key, value in (("signature", item.signature), ("encrypted", item.encrypted), ("id", item.id)):
                if value is not None:
                    thought[key] = value
            if item.redacted:
                thought["redacted"] = True
            thought = None
            continue
        thought = None
        if isinstance(item, TextChunk):
            if entries and "text" in entries[-1]:
                entries[-1]["text"] += item.text
            else:
                entries.append({"text": item.text})
        elif isinstance(item, ToolCallChunk):
            try:
                arguments: Any = json.loads(item.arguments)
            except json.JSONDecodeError:
                arguments = item.arguments
            entries.append({"tool_call": {"id": item.id, "name": item.name, "arguments": arguments}})
        elif isinstance(item, UsageChunk):
            usage = {"input_tokens": item.input_tokens, "output_tokens": item.output_tokens}
            if item.reasoning_tokens:
                usage["reasoning_tokens"] = item.reasoning_tokens
            entries.append({"usage": usage})
        elif isinstance(item, Finished):
            entries.append({"finish": item.stop_reason})
    return entries


class RecordingProvider:
    """Wraps a live provider; each reply that finishes is appended to the cassette."""

    def __init__(self, inner: Provider, path: Path, *, inside: Path | None = None) -> None:
        self.inner = inner
        self.path = Path(path)
        # TRUST-3: a cassette in the workspace is written relative to the workspace's
        # descriptors, so a planted link (.crystal/cassettes -> elsewhere) cannot lead
        # the recording out of it.
        self.inside = inside
        if inside is not None:
            try:
                os.close(open_folder_inside(inside, self.path.parent))
            except OSError as exc:
                raise UserError(f"Cannot record to {self.path}: {exc.strerror or exc}.") from None
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        if self.path.exists():
            try:
                load_cassette(self.path)
            except ProviderError as exc:
                # Never write over a cassette we cannot read: it may be a person's work.
                raise UserError(f"Cannot record: {exc}") from None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        items: list[StreamItem] = []
        async for item in self.inner.stream(request):
            items.append(item)
            yield item
        if items and isinstance(items[-1], Finished):
            self._append({"match": normalize(request), "reply": _reply_entries(items),
                          "provider": self.inner.name, "model": request.model or self.inner.model,
                          "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def _append(self, entry: dict[str, Any]) -> None:
        with _write_lock:
            data: dict[str, Any] = (load_cassette(self.path) if self.path.exists()
                                    else {"version": VERSION, "interactions": []})
            data["interactions"].append(redact(entry))  # TRUST-4: no key values in cassettes
            atomic_write_json(self.path, data, inside=self.inside)

    def annotate_last(self, **extra: Any) -> None:
        """Add keys (e.g. ``person``) to the newest recorded interaction."""
        with _write_lock:
            data = load_cassette(self.path)
            if data["interactions"]:
                data["interactions"][-1].update(redact(extra))
                atomic_write_json(self.path, data, inside=self.inside)

    async def aclose(self) -> None:
        await self.inner.aclose()
