"""The three wire protocols the loopback server speaks, as event builders.

Each builder turns one scripted reply into the protocol's SSE events (``sse()``) or its
non-streaming JSON body (``final()``), shaped like the real services' answers so the
official SDKs parse them.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

Reply = dict[str, Any]


def _split(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)] or []


def _calls(reply: Reply) -> list[dict[str, Any]]:
    """Normalise the reply's tool calls: ids filled in, arguments as raw JSON text."""
    calls = []
    for n, call in enumerate(reply.get("tool_calls", [])):
        arguments = call.get("arguments", {})
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append({"id": call.get("id") or f"call_{uuid.uuid4().hex[:10]}_{n}", "name": call["name"],
                      "arguments": raw})
    return calls


def _usage(reply: Reply) -> tuple[int, int]:
    usage = reply.get("usage", {})
    return int(usage.get("input_tokens", 11)), int(usage.get("output_tokens", 7))


def _reasoning_tokens(reply: Reply) -> int:
    return int(reply.get("usage", {}).get("reasoning_tokens", 0))


def _signature(reply: Reply, text: str) -> str:
    """The thinking block's signature: scripted, or an opaque one derived from the text."""
    return str(reply.get("signature") or "sig_" + base64.b64encode(text.encode()[:48]).decode())


def _encrypted(reply: Reply, text: str) -> str:
    return str(reply.get("encrypted") or "enc_" + base64.b64encode(("opaque:" + text).encode()[:64]).decode())


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"


class _ChatBuilder:
    """OpenAI Chat Completions: ``chat.completion.chunk`` deltas, usage chunk, ``[DONE]``."""

    def __init__(self, model: str, reply: Reply, body: dict[str, Any]) -> None:
        self.model, self.reply, self.body = model, reply, body
        self.id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        self.calls = _calls(reply)
        self.text = str(reply.get("text", ""))
        self.finish = reply.get("stop") or ("tool_calls" if self.calls else "stop")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        return _sse({"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def sse(self) -> Iterator[str]:
        yield self._chunk({"role": "assistant", "content": ""})
        # vLLM, DeepSeek and llama.cpp stream reasoning_content; Ollama streams reasoning.
        field = str(self.reply.get("reasoning_field", "reasoning_content"))
        for piece in _split(str(self.reply.get("reasoning", "")), int(self.reply.get("chunk", 4))):
            yield self._chunk({"content": None, field: piece})
        for piece in _split(self.text, int(self.reply.get("chunk", 4))):
            yield self._chunk({"content": piece})
        pieces = [_split(c["arguments"], int(self.reply.get("arg_chunk", 7))) for c in self.calls]
        starts = [self._chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                               "function": {"name": c["name"], "arguments": ""}}]})
                  for i, c in enumerate(self.calls)]
        if self.reply.get("whole_calls"):
            # As Ollama does: each call complete in one delta, every one at index 0.
            for c in self.calls:
                yield self._chunk({"tool_calls": [{"index": 0, "id": c["id"], "type": "function",
                                                   "function": {"name": c["name"], "arguments": c["arguments"]}}]})
        elif self.reply.get("interleave"):
            yield from starts
            for step in range(max((len(p) for p in pieces), default=0)):
                for i, p in enumerate(pieces):
                    if step < len(p):
                        yield self._chunk({"tool_calls": [{"index": i, "function": {"arguments": p[step]}}]})
        else:
            for i, p in enumerate(pieces):
                yield starts[i]
                for piece in p:
                    function = {"arguments": piece}
                    if self.reply.get("repeat_name"):  # as some servers do: the name in every fragment
                        function["name"] = self.calls[i]["name"]
                    yield self._chunk({"tool_calls": [{"index": i, "function": function}]})
        yield self._chunk({}, self.finish)
        if (self.body.get("stream_options") or {}).get("include_usage"):
            inp, out = _usage(self.reply)
            yield _sse({"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": self.model, "choices": [],
                        "usage": {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out,
                                  "completion_tokens_details": {
                                      "reasoning_tokens": _reasoning_tokens(self.reply)}}})
        yield _sse("[DONE]")

    def final(self) -> dict[str, Any]:
        inp, out = _usage(self.reply)
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.reply.get("reasoning"):
            message[str(self.reply.get("reasoning_field", "reasoning_content"))] = self.reply["reasoning"]
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for c in self.calls]
        return {"id": self.id, "object": "chat.completion", "created": int(time.time()), "model": self.model,
                "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
                "usage": {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}}


class _ResponsesBuilder:
    """OpenAI Responses API: typed events from ``response.created`` to ``response.completed``."""

    def __init__(self, model: str, reply: Reply, body: dict[str, Any]) -> None:
        self.model, self.reply = model, reply
        self.id = f"resp_{uuid.uuid4().hex[:12]}"
        self.calls = _calls(reply)
        self.text = str(reply.get("text", ""))
        self.seq = 0
        # A reasoning item: its summary streams as summary parts (paragraphs); its
        # encrypted content is only sent when the request asked for it (store: false).
        self.reasoning = str(reply.get("reasoning", ""))
        self.encrypt = "reasoning.encrypted_content" in (body.get("include") or [])

    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        inp, out = _usage(self.reply)
        result: dict[str, Any] = {"id": self.id, "object": "response", "created_at": int(time.time()),
                                  "status": status, "model": self.model, "output": output,
                                  "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                                  "error": None, "incomplete_details": None}
        if status == "incomplete":
            result["incomplete_details"] = {"reason": self.reply.get("stop", "max_output_tokens")}
        if status in ("completed", "incomplete"):
            result["usage"] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out,
                               "input_tokens_details": {"cached_tokens": 0},
                               "output_tokens_details": {"reasoning_tokens": _reasoning_tokens(self.reply)}}
        return result

    def _event(self, kind: str, **fields: Any) -> str:
        self.seq += 1
        return _sse({"type": kind, "sequence_number": self.seq, **fields}, kind)

    def _reasoning_item(self, done: bool) -> dict[str, Any]:
        summary = [{"type": "summary_text", "text": p} for p in self.reasoning.split("\n\n")] if done else []
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{self.id}", "summary": summary}
        if self.encrypt:
            item["encrypted_content"] = _encrypted(self.reply, self.reasoning)
        return item

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.reasoning:
            items.append(self._reasoning_item(True))
        if self.text:
            items.append({"type": "message", "id": f"msg_{self.id}", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": self.text, "annotations": []}]})
        for c in self.calls:
            items.append({"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"], "name": c["name"],
                          "arguments": c["arguments"], "status": "completed"})
        return items

    def sse(self) -> Iterator[str]:
        yield self._event("response.created", response=self._response("in_progress", []))
        yield self._event("response.in_progress", response=self._response("in_progress", []))
        index = 0
        if self.reasoning:
            item_id = f"rs_{self.id}"
            yield self._event("response.output_item.added", output_index=index, item=self._reasoning_item(False))
            for n, paragraph in enumerate(self.reasoning.split("\n\n")):
                part = {"type": "summary_text", "text": ""}
                yield self._event("response.reasoning_summary_part.added", item_id=item_id, output_index=index,
                                  summary_index=n, part=part)
                for piece in _split(paragraph, int(self.reply.get("chunk", 4))):
                    yield self._event("response.reasoning_summary_text.delta", item_id=item_id,
                                      output_index=index, summary_index=n, delta=piece)
                yield self._event("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
                                  summary_index=n, text=paragraph)
                yield self._event("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
                                  summary_index=n, part={**part, "text": paragraph})
            yield self._event("response.output_item.done", output_index=index, item=self._reasoning_item(True))
            index += 1
        if self.text:
            item_id = f"msg_{self.id}"
            yield self._event("response.output_item.added", output_index=index,
                              item={"type": "message", "id": item_id, "status": "in_progress",
                                    "role": "assistant", "content": []})
            yield self._event("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                              part={"type": "output_text", "text": "", "annotations": []})
            for piece in _split(self.text, int(self.reply.get("chunk", 4))):
                yield self._event("response.output_text.delta", item_id=item_id, output_index=index,
                                  content_index=0, delta=piece, logprobs=[])
            yield self._event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                              text=self.text, logprobs=[])
            yield self._event("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                              part={"type": "output_text", "text": self.text, "annotations": []})
            yield self._event("response.output_item.done", output_index=index,
                              item=self._items()[1 if self.reasoning else 0])
            index += 1
        for c in self.calls:
            item_id = f"fc_{c['id']}"
            item = {"type": "function_call", "id": item_id, "call_id": c["id"], "name": c["name"],
                    "arguments": "", "status": "in_progress"}
            yield self._event("response.output_item.added", output_index=index, item=item)
            for piece in _split(c["arguments"], int(self.reply.get("arg_chunk", 7))):
                yield self._event("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                                  delta=piece)
            yield self._event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                              name=c["name"], arguments=c["arguments"])
            yield self._event("response.output_item.done", output_index=index,
                              item={**item, "arguments": c["arguments"], "status": "completed"})
            index += 1
        status = "incomplete" if self.reply.get("stop") else "completed"
        yield self._event(f"response.{status}", response=self._response(status, self._items()))

    def final(self) -> dict[str, Any]:
        return self._response("completed", self._items())


class _AnthropicBuilder:
    """Anthropic Messages: message_start, content blocks with deltas, message_delta, message_stop."""

    def __init__(self, model: str, reply: Reply, body: dict[str, Any]) -> None:
        self.model, self.reply = model, reply
        self.id = f"msg_{uuid.uuid4().hex[:12]}"
        # A thinking block (thinking_delta pieces, then one signature_delta) and any
        # redacted_thinking blocks (their opaque data whole in content_block_start).
        self.reasoning = str(reply.get("reasoning", ""))
        self.redacted = [str(d) for d in reply.get("redacted_thinking", [])]
        self.calls = _calls(reply)
        self.text = str(reply.get("text", ""))
        self.stop = reply.get("stop") or ("tool_use" if self.calls else "end_turn")

    def _message(self, content: list[dict[str, Any]], stop: str | None, output_tokens: int) -> dict[str, Any]:
        inp, _ = _usage(self.reply)
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": inp, "output_tokens": output_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def sse(self) -> Iterator[str]:
        yield _sse({"type": "message_start", "message": self._message([], None, 1)}, "message_start")
        yield _sse({"type": "ping"}, "ping")
        index = 0
        if self.reasoning:
            yield _sse({"type": "content_block_start", "index": index,
                        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}, "content_block_start")
            for piece in _split(self.reasoning, int(self.reply.get("chunk", 4))):
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": piece}}, "content_block_delta")
            yield _sse({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": _signature(self.reply, self.reasoning)}},
                       "content_block_delta")
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        for data in self.redacted:
            yield _sse({"type": "content_block_start", "index": index,
                        "content_block": {"type": "redacted_thinking", "data": data}}, "content_block_start")
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        if self.text:
            yield _sse({"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}}, "content_block_start")
            for piece in _split(self.text, int(self.reply.get("chunk", 4))):
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        for c in self.calls:
            yield _sse({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}},
                       "content_block_start")
            for piece in _split(c["arguments"], int(self.reply.get("arg_chunk", 7))):
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        _, out = _usage(self.reply)
        yield _sse({"type": "message_delta", "delta": {"stop_reason": self.stop, "stop_sequence": None},
                    "usage": {"output_tokens": out}}, "message_delta")
        yield _sse({"type": "message_stop"}, "message_stop")

    def final(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.reasoning:
            content.append({"type": "thinking", "thinking": self.reasoning,
                            "signature": _signature(self.reply, self.reasoning)})
        content += [{"type": "redacted_thinking", "data": d} for d in self.redacted]
        if self.text:
            content.append({"type": "text", "text": self.text})
        for c in self.calls:
            try:
                arguments = json.loads(c["arguments"])
            except json.JSONDecodeError:
                arguments = {}
            content.append({"type": "tool_use", "id": c["id"], "name": c["name"], "input": arguments})
        return self._message(content, self.stop, _usage(self.reply)[1])


BUILDERS: dict[str, Any] = {"chat": _ChatBuilder, "responses": _ResponsesBuilder, "anthropic": _AnthropicBuilder}
