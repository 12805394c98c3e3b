"""Configuration mistakes fail fast with one line that names what to change (SPEC §11:
one English line, exit 2, nothing changed).

Each test runs the real ``crystal run`` against a real server on loopback: the scripted
model server of crystal_kernel/testing/, or Python's own ``http.server`` (a web server
that is not a model server at all). A mistake a retry cannot fix (a base URL without
``http://``, a malformed URL, a server that answers 404/405/501 on the protocol's path)
is reported at once, after at most one request; only what a retry can fix (5xx other than
501) is retried, and that line names the server and the number of attempts.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def crystal(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([CRYSTAL, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OPENAI_API_KEY": "sk-test", "CRYSTAL_MODEL": "gpt-test", **env})


def chat_requests(server: LLMServer) -> list[dict[str, object]]:
    """The requests for an answer (a server's context window is asked for apart)."""
    return [r for r in server.requests if str(r["path"]).endswith("/chat/completions")]


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    return lines[0]


@pytest.mark.parametrize("url, says", [
    ("localhost:{port}/v1", "'localhost:{port}/v1' has no http:// or https://; write it as http://localhost:{port}/v1."),
    ("http://127.0.0.1:notaport/v1", "'http://127.0.0.1:notaport/v1' is not a valid URL"),
    ("ftp://127.0.0.1:{port}/v1", "must start with http:// or https://, not ftp://."),
])
def test_a_base_url_the_client_cannot_use_fails_at_once_without_a_request(workspace: Path, url: str,
                                                                          says: str) -> None:
    with LLMServer([{"text": "never asked"}]) as server:
        started = time.monotonic()
        out = crystal(["run", "hi", "--workspace", str(workspace), "--provider", "openai",
                       "--base-url", url.format(port=server.port)], {})
        elapsed = time.monotonic() - started
        requests = chat_requests(server)
    line = one_line(out)
    assert line.startswith("crystal: The base URL (--base-url, baseUrl or CRYSTAL_BASE_URL) "), line
    assert says.format(port=server.port) in line
    assert requests == []
    assert elapsed < 20, "a configuration error is not retried"


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[str]:
    """Python's http.server in a child process: a web server, not a model server (it
    answers POST with 501 Unsupported method)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_web_server_that_is_not_a_model_server_is_named_with_a_hint(workspace: Path, web_server: str) -> None:
    out = crystal(["run", "hi", "--workspace", str(workspace), "--provider", "openai",
                   "--base-url", web_server + "/v1"], {})
    line = one_line(out)
    assert line == (f"crystal: The server at {web_server}/v1 is not an OpenAI Chat Completions model server: POST "
                    f"{web_server}/v1/chat/completions answered HTTP 501; is --base-url "
                    "(baseUrl) the server's /v1 address, e.g. http://localhost:11434/v1?"), line


def test_a_wrong_path_gets_a_404_and_the_hint_after_one_request(workspace: Path) -> None:
    with LLMServer([{"text": "never asked"}]) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace), "--provider", "openai",
                       "--base-url", server.url + "/api"], {})
        requests = chat_requests(server)
    line = one_line(out)
    assert f"The server at {server.url}/api is not an OpenAI Chat Completions model server" in line
    assert f"POST {server.url}/api/chat/completions answered HTTP 404 (No route /api/chat/completions)" in line
    assert "is --base-url (baseUrl) the server's /v1 address" in line
    assert len(requests) == 1, "a retry cannot fix a wrong address"


@pytest.mark.parametrize("status", [405, 501])
def test_405_and_501_are_not_retried(workspace: Path, status: int) -> None:
    with LLMServer([{"status": status, "message": "no chat here"}] * 4) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace), "--provider", "openai",
                       "--base-url", server.base_url], {})
        requests = chat_requests(server)
    line = one_line(out)
    assert f"answered HTTP {status} (no chat here); is --base-url" in line
    assert len(requests) == 1


def test_500_is_retried_and_then_names_the_server_in_one_sentence(workspace: Path) -> None:
    with LLMServer([{"status": 500, "message": "boom"}] * 4) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace), "--provider", "openai",
                       "--base-url", server.base_url], {})
        requests = chat_requests(server)
    line = one_line(out)
    assert line == f"crystal: The model server at {server.base_url} failed (HTTP 500) after 4 attempts: boom"
    assert len(requests) == 4


def test_a_misspelt_config_key_is_named_with_the_likely_key_and_survives_saves(workspace: Path,
                                                                             private_home: Path) -> None:
    """SPEC §11: unknown keys survive every save; a misspelling gets one note (difflib)."""
    config = private_home / "config.json"
    config.write_text(json.dumps({"provider": "openai", "modle": "gpt-x", "futureKey": {"a": 1}}))
    with LLMServer([{"text": "Hello."}]) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace), "--base-url", server.base_url], {})
        sent_model = server.bodies("chat")[0]["model"]
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hello.\n"
    notes = [line for line in out.stderr.splitlines() if line.startswith("note: unknown key")]
    assert notes == [f"note: unknown key 'modle' in {config} — did you mean 'model'?",
                     f"note: unknown key 'futureKey' in {config} is ignored (kept in the file; see "
                     "docs/configuration.md)."], out.stderr
    assert sent_model == "gpt-test"  # CRYSTAL_MODEL; the misspelt key set nothing
    # A preference save (/approval) rewrites config.json: both unknown keys are still there.
    saved = crystal(["run", "/approval edit", "--workspace", str(workspace)], {})
    assert saved.returncode == 0, saved.stderr
    data = json.loads(config.read_text())
    assert data["approval"] == "edit" and data["modle"] == "gpt-x" and data["futureKey"] == {"a": 1}
