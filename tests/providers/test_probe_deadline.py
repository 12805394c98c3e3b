"""SPEC §13 "Waits": every request to a model server, probes included, ends
within requestTimeoutSeconds. The context-window probe of a local server (vLLM, llama.cpp,
Ollama's POST /api/show, LM Studio) used a per-read timeout only, so a server — or a
gateway in front of a stuck upstream — that answers with SSE keep-alive comments held
`crystal run` as long as it kept dribbling. Attacked through a real `crystal run`
against the loopback server answering /api/show with ``: ping`` every 0.2 s for two
minutes; on the old code the run outlives the test's 60 s limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def test_a_probe_answered_with_keep_alives_ends_within_the_request_timeout(workspace, private_home):
    (private_home / "config.json").write_text(json.dumps({"requestTimeoutSeconds": 4}))
    with LLMServer([{"text": "Answered."}], info={"show_ping": 120}, max_hang=120) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="llama3", OPENAI_API_KEY="sk-test")
        started = time.monotonic()
        out = subprocess.run([CRYSTAL, "run", "hello", "--workspace", str(workspace)], capture_output=True,
                             text=True, env=env, timeout=60)
        took = time.monotonic() - started
        paths = [r["path"] for r in server.requests]
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Answered."
    assert "/api/show" in paths  # the probe did ask, and was cut off
    # The probe as a whole ends by requestTimeoutSeconds (4 s); start-up and the answer
    # take a few seconds more on a loaded machine.
    assert took < 25, took


async def test_the_probe_gives_up_on_its_deadline_in_process():
    """server_info.context_window with a 1 s deadline returns None (the table's guess
    stays) well before the server stops dribbling."""
    from crystal_kernel.providers.server_info import context_window

    with LLMServer([], info={"show_ping": 60}, max_hang=60) as server:
        started = time.monotonic()
        found = await context_window(server.base_url, "llama3", None, deadline=1.0)
        took = time.monotonic() - started
    assert found is None
    assert took < 3, took


class _HeldProbes:
    """A model server whose four window questions are each held until all four are open
    (or 2 s passed), counting how many were open at once; /api/show answers as Ollama."""

    def __init__(self) -> None:
        import threading

        self.cond = threading.Condition()
        self.open = 0
        self.most = 0

    def serve(self):  # -> (server, base_url)
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        held = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                with held.cond:
                    held.open += 1
                    held.most = max(held.most, held.open)
                    held.cond.notify_all()
                    held.cond.wait_for(lambda: held.most >= 4, timeout=2.0)
                    held.open -= 1
                body = b"{}"
                status = 404
                if self.path == "/api/show":
                    body, status = json.dumps({"parameters": "num_ctx 6144"}).encode(), 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self._answer()

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


async def test_the_window_questions_go_out_together():
    """The probe runs beside a new conversation's first request and the second step waits
    for it (docs/benchmarks.md: it lengthened the first tool call's gap): its four
    questions (vLLM, llama.cpp, Ollama, LM Studio) go out at once and are read in their
    order, so it takes one round trip, not four. On the old code they went one by one."""
    import threading

    from crystal_kernel.providers.server_info import context_window

    held = _HeldProbes()
    server, base_url = held.serve()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        found = await context_window(base_url, "llama3", None, deadline=30.0)
    finally:
        server.shutdown()
        server.server_close()
    assert found == (6144, "Ollama /api/show")
    assert held.most == 4, f"{held.most} of the four questions were open at once"
