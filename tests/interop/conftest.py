"""The interop suite (`make interop`, docs/interop.md): Crystal against a real llama.cpp
``llama-server`` serving SmolLM2-135M, built by ``tests/interop/build.sh`` into
``build/interop/``.

Not part of `make test`: without ``CRYSTAL_INTEROP=1`` (set by `make interop`) nothing
here is collected, so the ordinary suite never needs the 10-30 minute build. With it,
a missing binary or model is a failure naming the command that makes them, never a skip.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "interop"
LLAMA_SERVER = CACHE / "bin" / "llama-server"
MODEL = CACHE / "model.gguf"
ALIAS = "smollm2-135m"
# SmolLM2's own template (ChatML) has no tools; the Qwen2.5 template is the same ChatML
# plus the Hermes <tool_call> convention, which llama.cpp parses into streamed
# tool_calls. See tool_template.jinja for the one line it adds.
TOOL_TEMPLATE = Path(__file__).with_name("tool_template.jinja")
CRYSTAL = str(Path(sys.executable).parent / "crystal")
START_TIMEOUT = 120.0

if os.environ.get("CRYSTAL_INTEROP") != "1":
    collect_ignore_glob = ["test_*.py"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """One ``llama-server`` process on a free loopback port; its log kept for failures."""

    def __init__(self, log_dir: Path, *, ctx: int, template: Path | None = TOOL_TEMPLATE,
                 ignore_eos: bool = False) -> None:
        self.ctx = ctx
        self.template = template
        # ignore_eos: the answer runs to the output limit (a stream long enough to kill).
        self.ignore_eos = ignore_eos
        self.log_path = log_dir / f"llama-server-{ctx}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        return self.root + "/v1"

    def start(self) -> LlamaServer:
        for missing in (LLAMA_SERVER, MODEL):
            if not missing.exists():
                pytest.fail(f"{missing} is missing: run `make interop` (it builds and downloads them).")
        self.port = free_port()
        args = [str(LLAMA_SERVER), "--host", "127.0.0.1", "--port", str(self.port), "-m", str(MODEL),
                "--alias", ALIAS, "-c", str(self.ctx), "-np", "1", "-t", "2",
                # Deterministic answers: greedy sampling, fixed seed.
                "--temp", "0", "--seed", "1", "--jinja", "--no-webui"]
        if self.template is not None:
            args += ["--chat-template-file", str(self.template)]
        if self.ignore_eos:
            args.append("--ignore-eos")
        log = self.log_path.open("ab")
        # Low priority: the machine is shared; a new process group so a kill reaches it all.
        self.proc = subprocess.Popen(["nice", "-n", "10", *args], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"llama-server exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            try:
                if httpx.get(self.root + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        pytest.fail(f"llama-server did not become healthy in {START_TIMEOUT:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL, as a crash would: no goodbye on any open connection."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Iterator[LlamaServer]:
    """A server with room for Crystal's system prompt and tool list (SmolLM2: 8,192)."""
    server = LlamaServer(tmp_path_factory.mktemp("llama"), ctx=8192).start()
    yield server
    server.stop()


def write_config(home: Path, **keys: Any) -> None:
    """config.json in Crystal's Home: every request bounded (a 135M model rambles)."""
    config = {"maxOutputTokens": 48, "requestTimeoutSeconds": 90, "maxSteps": 3, "approval": "full",
              "topicNaming": False, **keys}
    (home / "config.json").write_text(json.dumps(config))


def crystal_run(prompt: str, server: LlamaServer, workspace: Path, *, provider: str = "openai",
                extra: list[str] | None = None, timeout: float = 240) -> tuple[subprocess.CompletedProcess[str],
                                                                                list[dict[str, Any]]]:
    """`crystal run` in a real subprocess against ``server``: the result and its jsonl events."""
    base = server.root if provider == "anthropic" else server.v1
    args = [CRYSTAL, "run", prompt, "--workspace", str(workspace), "--provider", provider, "--base-url", base,
            "--model", ALIAS, "--format", "jsonl", *(extra or [])]
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=dict(os.environ),
                         stdin=subprocess.DEVNULL)
    events = []
    for line in out.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pytest.fail(f"stdout line is not JSON: {line!r}\nstderr: {out.stderr}")
    return out, events


def only_tools(*keep: str) -> list[str]:
    """``--disable-tool`` flags for every built-in tool but ``keep``: a 135M model and a
    short context cannot take Crystal's whole catalogue."""
    from crystal_kernel.tools.catalog import BUILTIN_TOOLS

    assert set(keep) <= set(BUILTIN_TOOLS), sorted(BUILTIN_TOOLS)
    return [flag for name in BUILTIN_TOOLS if name not in keep for flag in ("--disable-tool", name)]
