"""A loopback HTTP server that speaks the real model streaming protocols, for tests.

It answers ``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/responses``
(OpenAI Responses API) and ``POST /v1/messages`` (Anthropic Messages), streaming (SSE)
or not, from a queue of scripted replies. A reply is a JSON-able dict:

- ``text``: the answer text, streamed in pieces of ``chunk`` characters (default 4);
- ``tool_calls``: ``[{"name", "arguments" (dict or raw text), "id"?}]``; argument JSON is
  streamed in pieces of ``arg_chunk`` characters (default 7); ``interleave: true`` sends
  the Chat Completions deltas of several calls interleaved by index;
- ``usage``: ``{"input_tokens", "output_tokens"}`` (default 11 / 7);
- ``stop``: an explicit stop reason in the protocol's own words;
- ``delay``: seconds between streamed events;
- faults: ``status`` (an HTTP error: 429, 500, 401, 404, ...) with optional ``headers``
  (e.g. ``{"retry-after": "0.05"}``) and ``message``; ``cut_after: N`` closes the
  connection abruptly after N events (the chunked body is left incomplete); ``end_after:
  N`` ends the body properly but early, after N events (no finish, no ``[DONE]``); ``hang:
  SECONDS`` (with ``hang_after: N`` events first) stops sending until the client goes
  away or the time (capped by ``max_hang``) is up.

``router(body, path) -> reply | None`` may pick a reply per request (one server playing
agent and reviewer); ``None`` falls back to the queue. An empty queue answers HTTP 500
with a message saying so. Every request (method, path, headers, JSON body) is logged,
capped at ``log_limit`` entries.

In process::

    with LLMServer([{"text": "hi"}]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")

As a process (for kernels and CLIs under test)::

    python -m crystal_kernel.testing.llm_server --script replies.json --port 0 [--log FILE]
        [--router module:function] [--lifetime SECONDS]

prints ``http://127.0.0.1:PORT`` on its first stdout line. ``GET /_log`` returns the
request log, ``POST /_script`` appends replies (a list or ``{"replies": [...]}``).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import select
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

Reply = dict[str, Any]
Router = Callable[[dict[str, Any], str], "Reply | None"]

PATHS = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
}


class LLMServer:
    """A scripted model server on 127.0.0.1; use as a context manager or start()/stop()."""

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        router: Router | None = None,
        port: int = 0,
        log_limit: int = 500,
        max_hang: float = 30.0,
        log_file: Path | None = None,
    ) -> None:
        self._replies: collections.deque[Reply] = collections.deque(replies or [])
        self.router = router
        self.max_hang = max_hang
        self.log_file = Path(log_file) if log_file else None
        self._log: collections.deque[dict[str, Any]] = collections.deque(maxlen=log_limit)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # Counts of connections a client closed while the server hung on them.
        self.disconnects = 0
        self._disconnect_event = threading.Condition(self._lock)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (Anthropic SDK base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (OpenAI SDK base URL)."""
        return self.url + "/v1"

    def start(self) -> "LLMServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script and log ------------------------------------------------------------
    def add(self, *replies: Reply) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Logged requests: ``{"method", "path", "headers" (lower-case names), "body", "time"}``."""
        with self._lock:
            return list(self._log)

    def bodies(self, path_kind: str | None = None) -> list[dict[str, Any]]:
        """JSON bodies of the model requests (``chat``, ``responses``, ``anthropic`` or all)."""
        return [r["body"] for r in self.requests
                if r["path"] in PATHS and (path_kind is None or PATHS[r["path"]] == path_kind)]

    def wait_for_disconnect(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait until ``count`` hung connections were closed by their client."""
        deadline = time.monotonic() + timeout
        with self._disconnect_event:
            while self.disconnects < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._disconnect_event.wait(left)
            return True

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._log.append(entry)
        if self.log_file is not None:
            with self._lock, open(self.log_file, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")

    def _next_reply(self, body: dict[str, Any], path: str) -> Reply | None:
        if self.router is not None:
            chosen = self.router(body, path)
            if chosen is not None:
                return chosen
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def _note_disconnect(self) -> None:
        with self._disconnect_event:
            self.disconnects += 1
            self._disconnect_event.notify_all()


class _Cut(Exception):
    """Raised inside a handler to drop the connection without finishing the body."""


def _make_handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            if self.path == "/_log":
                self._send_json(200, {"requests": server.requests})
            elif self.path in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": []})
            else:
                self._send_json(404, {"error": {"message": f"No route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparsed": raw[:2000].decode("utf-8", "replace")}
            path = self.path.split("?", 1)[0]
            if path == "/_script":
                replies = body.get("replies", []) if isinstance(body, dict) else body
                server.add(*replies)
                self._send_json(200, {"pending": server.pending})
                return
            server._record({"method": "POST", "path": path, "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body, "time": time.time()})
            kind = PATHS.get(path)
            if kind is None:
                self._send_json(404, {"error": {"message": f"No route {path}", "type": "not_found"}})
                return
            reply = server._next_reply(body, path)
            if reply is None:
                self._send_error(kind, 500, "llm_server: no scripted reply left for this request.", {})
                return
            try:
                self._answer(kind, body, reply)
            except (_Cut, BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        # -- answering ---------------------------------------------------------------
        def _answer(self, kind: str, body: dict[str, Any], reply: Reply) -> None:
            if "status" in reply:
                self._send_error(kind, int(reply["status"]), str(reply.get("message", "scripted failure")),
                                 reply.get("headers", {}))
                return
            model = str(body.get("model", "model"))
            builder = {"chat": _ChatBuilder, "responses": _ResponsesBuilder, "anthropic": _AnthropicBuilder}[kind]
            events = builder(model, reply, body)
            if not body.get("stream"):
                self._send_json(200, events.final())
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            cut_after = reply.get("cut_after")
            hang_after = reply.get("hang_after", 0) if "hang" in reply else None
            delay = float(reply.get("delay", 0))
            end_after = reply.get("end_after")
            sent = 0
            for event in events.sse():
                if end_after is not None and sent >= int(end_after):
                    break
                if cut_after is not None and sent >= int(cut_after):
                    raise _Cut()
                if hang_after is not None and sent >= int(hang_after):
                    self._hang(float(reply["hang"]))
                    raise _Cut()
                if delay:
                    time.sleep(delay)
                self._chunk(event)
                sent += 1
            if cut_after is not None or hang_after is not None:
                raise _Cut()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _hang(self, seconds: float) -> None:
            """Send nothing until the client closes the connection or time is up."""
            deadline = time.monotonic() + min(seconds, server.max_hang)
            while time.monotonic() < deadline and not server._stopping.is_set():
                readable, _, _ = select.select([self.connection], [], [], 0.05)
                if readable:
                    try:
                        data = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        server._note_disconnect()
                        return
                    time.sleep(0.05)

        def _chunk(self, data: str) -> None:
            raw = data.encode("utf-8")
            self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            self.wfile.flush()

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            self.end_headers()
            self.wfile.write(raw)
            self.wfile.flush()

        def _send_error(self, kind: str, status: int, message: str, headers: dict[str, str]) -> None:
            if kind == "anthropic":
                types = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
                payload: dict[str, Any] = {"type": "error", "error": {"type": types.get(status, "api_error"),
                                                                      "message": message}}
            else:
                payload = {"error": {"message": message, "type": "invalid_request_error" if status < 500
                                     else "server_error", "param": None, "code": None}}
            self._send_json(status, payload, headers)

    return Handler


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
        for piece in _split(self.text, int(self.reply.get("chunk", 4))):
            yield self._chunk({"content": piece})
        pieces = [_split(c["arguments"], int(self.reply.get("arg_chunk", 7))) for c in self.calls]
        starts = [self._chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                               "function": {"name": c["name"], "arguments": ""}}]})
                  for i, c in enumerate(self.calls)]
        if self.reply.get("interleave"):
            yield from starts
            for step in range(max((len(p) for p in pieces), default=0)):
                for i, p in enumerate(pieces):
                    if step < len(p):
                        yield self._chunk({"tool_calls": [{"index": i, "function": {"arguments": p[step]}}]})
        else:
            for i, p in enumerate(pieces):
                yield starts[i]
                for piece in p:
                    yield self._chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield self._chunk({}, self.finish)
        if (self.body.get("stream_options") or {}).get("include_usage"):
            inp, out = _usage(self.reply)
            yield _sse({"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": self.model, "choices": [],
                        "usage": {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}})
        yield _sse("[DONE]")

    def final(self) -> dict[str, Any]:
        inp, out = _usage(self.reply)
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
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
                               "output_tokens_details": {"reasoning_tokens": 0}}
        return result

    def _event(self, kind: str, **fields: Any) -> str:
        self.seq += 1
        return _sse({"type": kind, "sequence_number": self.seq, **fields}, kind)

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
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
            yield self._event("response.output_item.done", output_index=index, item=self._items()[0])
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
        if self.text:
            content.append({"type": "text", "text": self.text})
        for c in self.calls:
            try:
                arguments = json.loads(c["arguments"])
            except json.JSONDecodeError:
                arguments = {}
            content.append({"type": "tool_use", "id": c["id"], "name": c["name"], "input": arguments})
        return self._message(content, self.stop, _usage(self.reply)[1])


def _load_router(spec: str) -> Router:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground until killed; print its URL first."""
    parser = argparse.ArgumentParser(prog="python -m crystal_kernel.testing.llm_server")
    parser.add_argument("--script", type=Path, help="JSON file: a list of replies or {\"replies\": [...]}")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, help="append every request as one JSON line to this file")
    parser.add_argument("--router", help="module:function picking a reply per request")
    parser.add_argument("--max-hang", type=float, default=30.0)
    parser.add_argument("--lifetime", type=float, default=900.0,
                        help="exit after this many seconds, so a forgotten server never lingers")
    args = parser.parse_args(argv)
    replies: list[Reply] = []
    if args.script:
        data = json.loads(args.script.read_text(encoding="utf-8"))
        replies = data.get("replies", []) if isinstance(data, dict) else data
    server = LLMServer(replies, port=args.port, log_file=args.log, max_hang=args.max_hang,
                       router=_load_router(args.router) if args.router else None)
    print(server.url, flush=True)
    timer = threading.Timer(args.lifetime, server._httpd.shutdown)
    timer.daemon = True
    timer.start()
    try:
        server._httpd.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
