"""A loopback HTTP server that speaks the real model streaming protocols, for tests.

It answers ``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/responses``
(OpenAI Responses API) and ``POST /v1/messages`` (Anthropic Messages), streaming (SSE)
or not, from a queue of scripted replies. A reply is a JSON-able dict:

- ``text``: the answer text, streamed in pieces of ``chunk`` characters (default 4);
- ``tool_calls``: ``[{"name", "arguments" (dict or raw text), "id"?}]``; argument JSON is
  streamed in pieces of ``arg_chunk`` characters (default 7); ``interleave: true`` sends
  the Chat Completions deltas of several calls interleaved by index; ``whole_calls: true``
  sends each call whole, all at index 0 (as Ollama does); ``repeat_name: true`` repeats
  the function name in every argument fragment (as some servers do);
- ``reasoning``: reasoning text before the answer, in each protocol's own shape: Chat
  Completions ``reasoning_content`` deltas (``reasoning_field: "reasoning"`` as Ollama
  sends), a Responses reasoning item whose summary parts (paragraphs) stream as
  ``response.reasoning_summary_text.delta`` with ``encrypted_content`` when the request
  included ``reasoning.encrypted_content`` (``encrypted`` scripts it), an Anthropic
  ``thinking`` block of ``thinking_delta`` pieces closed by a ``signature_delta``
  (``signature`` scripts it); ``redacted_thinking: [DATA, ...]`` adds Anthropic redacted
  blocks;
- ``usage``: ``{"input_tokens", "output_tokens", "reasoning_tokens"?}`` (default 11 / 7 / 0);
- ``stop``: an explicit stop reason in the protocol's own words;
- ``delay``: seconds between streamed events; :meth:`LLMServer.hurry` sends the rest of
  the streams in progress at once (a long stream that need not last once a test has seen
  it flow);
- ``hold_after: N`` (or a list of such counts): after N streamed events, wait until the
  test calls :meth:`LLMServer.release` (or ``max_hang`` seconds pass), then go on: a
  reply caught mid-stream for as long as a test looks at it (:meth:`LLMServer.wait_held`);
  with Chat Completions the first event is the role, then one per ``chunk`` of text;
- faults: ``status`` (an HTTP error: 429, 500, 401, 404, ...) with optional ``headers``
  (e.g. ``{"retry-after": "0.05"}``) and ``message``; ``cut_after: N`` closes the
  connection abruptly after N events (the chunked body is left incomplete); ``end_after:
  N`` ends the body properly but early, after N events (no finish, no ``[DONE]``); ``hang:
  SECONDS`` (with ``hang_after: N`` events first) stops sending until the client goes
  away or the time (capped by ``max_hang``) is up; ``ping: SECONDS`` (with ``ping_after:
  N`` events first) sends only SSE keep-alive comments (``: ping``, every ``ping_every``
  seconds, default 0.2) until the client goes away or the time (capped by ``max_hang``)
  is up, then drops the connection.

``router(body, path) -> reply | None`` may pick a reply per request (one server playing
agent and reviewer); ``None`` falls back to the queue. An empty queue answers HTTP 500
with a message saying so. Every request (method, path, headers, JSON body) is logged,
capped at ``log_limit`` entries.

In process::

    with LLMServer([{"text": "hi"}]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")

As a process (for kernels and CLIs under test)::

    python -m crystal_kernel.testing.llm_server --script replies.json --port 0 [--log FILE]
        [--router module:function] [--lifetime SECONDS] [--log-limit N]

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
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from crystal_kernel.testing.llm_protocols import BUILDERS

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
        info: dict[str, Any] | None = None,
    ) -> None:
        # What the server says about itself, as local servers do: "models" (the data of
        # GET /v1/models, e.g. vLLM's max_model_len or llama.cpp's meta), "props"
        # (llama.cpp's GET /props) and "show" (Ollama's POST /api/show); "show_ping": SECONDS
        # answers /api/show with SSE keep-alive comments only, for that long (max_hang caps it).
        self.info = dict(info or {})
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
        # hold_after: set while a reply waits mid-stream / to let it go on.
        self._held = threading.Event()
        self._release = threading.Event()
        # Counts hurry() calls: a stream started before the last one has no more delay.
        self._hurries = 0
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

    def start(self) -> LLMServer:
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

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script and log ------------------------------------------------------------
    def add(self, *replies: Reply) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._replies.extend(replies)

    def clear(self) -> None:
        """Drop the replies still queued (a test starting from a known script)."""
        with self._lock:
            self._replies.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Logged requests: ``{"method", "path", "headers" (lower-case names), "body", "bytes"
        (the size of the body as received), "time"}``;
        model requests also get ``"sent"``: when the reply's last byte was written."""
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

    def wait_held(self, timeout: float = 30.0) -> bool:
        """Wait until a reply with ``hold_after`` has sent its first events and waits."""
        return self._held.wait(timeout)

    def release(self) -> None:
        """Let the reply that waits (or the next one to hold) go on."""
        self._held.clear()
        self._release.set()

    def hurry(self) -> None:
        """Send the rest of the streams in progress without their ``delay`` between
        events (streams started later keep theirs)."""
        self._hurries += 1

    def _hold(self) -> None:
        self._held.set()
        self._release.wait(self.max_hang)
        self._release.clear()
        self._held.clear()

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
        # TCP_NODELAY: without it the small last chunk of a reply waits for the client's
        # delayed ACK (~40 ms on loopback), which every client then sees as latency.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            if self.path == "/_log":
                self._send_json(200, {"requests": server.requests})
            elif self.path in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": server.info.get("models", [])})
            elif self.path == "/props" and "props" in server.info:
                self._send_json(200, server.info["props"])
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
                scripted = [reply for reply in replies if isinstance(reply, dict)] if isinstance(replies, list) else []
                if not isinstance(replies, list) or len(scripted) != len(replies):
                    self._send_json(400, {"error": {"message": "llm_server: replies must be a list of objects.",
                                                    "type": "invalid_request_error"}})
                    return
                server.add(*scripted)
                self._send_json(200, {"pending": server.pending})
                return
            entry = {"method": "POST", "path": path, "headers": {k.lower(): v for k, v in self.headers.items()},
                     "body": body, "bytes": len(raw), "time": time.time()}
            server._record(entry)
            kind = PATHS.get(path)
            if path == "/api/show" and "show_ping" in server.info:
                self._keep_alive_only(float(server.info["show_ping"]))
                return
            if path == "/api/show" and "show" in server.info:
                self._send_json(200, server.info["show"])
                return
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
            finally:
                # When the last byte of the reply left (benchmarks: reply sent -> next request).
                entry["sent"] = time.time()

        # -- answering ---------------------------------------------------------------
        def _answer(self, kind: str, body: dict[str, Any], reply: Reply) -> None:
            if "status" in reply:
                self._send_error(kind, int(reply["status"]), str(reply.get("message", "scripted failure")),
                                 reply.get("headers", {}))
                return
            model = str(body.get("model", "model"))
            events = BUILDERS[kind](model, reply, body)
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
            ping_after = reply.get("ping_after", 0) if "ping" in reply else None
            delay = float(reply.get("delay", 0))
            hurries = server._hurries
            end_after = reply.get("end_after")
            holds = reply.get("hold_after", [])
            holds = {int(n) for n in (holds if isinstance(holds, list) else [holds])}
            sent = 0
            for event in events.sse():
                if end_after is not None and sent >= int(end_after):
                    break
                if sent in holds:
                    server._hold()
                if cut_after is not None and sent >= int(cut_after):
                    raise _Cut()
                if hang_after is not None and sent >= int(hang_after):
                    self._hang(float(reply["hang"]))
                    raise _Cut()
                if ping_after is not None and sent >= int(ping_after):
                    self._ping(float(reply["ping"]), float(reply.get("ping_every", 0.2)))
                    raise _Cut()
                if delay and server._hurries == hurries:
                    time.sleep(delay)
                self._chunk(event)
                sent += 1
            if cut_after is not None or hang_after is not None or ping_after is not None:
                raise _Cut()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _keep_alive_only(self, seconds: float) -> None:
            """A 200 event stream of nothing but keep-alive comments (a gateway in front
            of a stuck upstream), then the connection is dropped."""
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self._ping(seconds, 0.2)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

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

        def _ping(self, seconds: float, every: float) -> None:
            """Only SSE comments (keep-alives) until the client goes away or time is up."""
            deadline = time.monotonic() + min(seconds, server.max_hang)
            while time.monotonic() < deadline and not server._stopping.is_set():
                try:
                    self._chunk(": ping\n\n")
                except OSError:
                    server._note_disconnect()
                    return
                time.sleep(every)

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


def _load_router(spec: str) -> Router:
    module, _, attr = spec.partition(":")
    router: Router = getattr(importlib.import_module(module), attr)
    return router


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground until killed; print its URL first."""
    parser = argparse.ArgumentParser(prog="python -m crystal_kernel.testing.llm_server")
    parser.add_argument("--script", type=Path, help="JSON file: a list of replies or {\"replies\": [...]}")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, help="append every request as one JSON line to this file")
    parser.add_argument("--router", help="module:function picking a reply per request")
    parser.add_argument("--max-hang", type=float, default=30.0)
    parser.add_argument("--log-limit", type=int, default=500, help="requests kept for GET /_log")
    parser.add_argument("--lifetime", type=float, default=900.0,
                        help="exit after this many seconds, so a forgotten server never lingers")
    args = parser.parse_args(argv)
    replies: list[Reply] = []
    if args.script:
        data = json.loads(args.script.read_text(encoding="utf-8"))
        replies = data.get("replies", []) if isinstance(data, dict) else data
    server = LLMServer(replies, port=args.port, log_file=args.log, max_hang=args.max_hang, log_limit=args.log_limit,
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
