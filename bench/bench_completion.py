"""Inline completions (NB-2): the latency Crystal adds over the model's own time.

A real ``jupyter server`` with Crystal's server extension, pointed at the loopback model
server, answers ``POST crystal/api/completion`` (the request JupyterLab's inline
completer makes through the lab extension) RUNS times. Before each, the same model
request goes straight to the model server (the model's own time: its streamed answer,
read to the end). What Crystal adds for one completion is the difference of the pair:
the Jupyter request and its auth, reading the person's config, building the prompt,
the provider layer's request and stream, and the JSON lines back to the page.

Rows: the p50 and p95 of what Crystal adds (target: at most 30 ms at p95), each with the
model server's own time at the same percentile as the reference.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 50
WARMUP = 5
TARGET_MS = 30.0
ANSWER = {"text": "df.groupby('region')['amount'].sum()", "chunk": 4}
BODY = {"prefix": "import pandas as pd\ndf = pd.read_csv('sales.csv')\ntotals = ", "suffix": "",
        "language": "python", "cellsAbove": ["rates = {'EUR': 1.1}"], "variables": "rates: dict = {'EUR': 1.1}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[float, bytes]:
    """One POST read to its end: (milliseconds, body)."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {data[:200]!r}")
    finally:
        conn.close()
    return (time.perf_counter() - start) * 1000, data


def _start_server(base: Path, model_url: str) -> tuple[subprocess.Popen[bytes], int, str]:
    home = base / "home"
    (home / ".crystal").mkdir(parents=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False}))
    root = base / "root"
    root.mkdir()
    token, port = secrets.token_hex(16), _free_port()
    env = {**os.environ, "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
           "CRYSTAL_MODEL": "small-model", "CRYSTAL_BASE_URL": model_url, "CRYSTAL_API_KEY_ENV": "BENCH_KEY",
           "BENCH_KEY": "bench", "JUPYTER_CONFIG_DIR": str(base / "config"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    argv = [sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--allow-root"]
    (base / "config").mkdir()
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {"crystal_kernel.jupyter.server_ext": True}}}))
    log = open(base / "server.log", "wb")  # noqa: SIM115 - closed with the process below
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", f"/api/status?token={token}")
            if conn.getresponse().status == 200:
                return proc, port, token
        except OSError:
            time.sleep(0.2)
        if proc.poll() is not None:
            break
    _stop(proc)
    tail = (base / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
    raise RuntimeError("jupyter server did not start: " + " | ".join(tail))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.log.close()  # type: ignore[attr-defined]


def _percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[int(q) - 1]


def main() -> list[dict[str, Any]]:
    from crystal_kernel.testing.llm_server import LLMServer

    with tempfile.TemporaryDirectory(prefix="bench-completion-") as tmp, LLMServer(router=lambda body, path: dict(ANSWER)) as model:
        proc, port, token = _start_server(Path(tmp), model.base_url)
        try:
            auth = {"Authorization": f"token {token}"}
            # The model request Crystal sends, to send the same one straight to the model server.
            _post(port, "/crystal/api/completion", BODY, auth)
            direct_body = model.bodies("chat")[-1]
            direct, added = [], []
            for i in range(WARMUP + RUNS):
                own, _ = _post(model.port, "/v1/chat/completions", direct_body, {"Authorization": "Bearer bench"})
                ours, data = _post(port, "/crystal/api/completion", BODY, auth)
                lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
                assert "".join(x.get("text", "") for x in lines) == ANSWER["text"], lines
                if i >= WARMUP:
                    direct.append(own)
                    added.append(ours - own)
        finally:
            _stop(proc)
    rows = []
    for q in (50, 95):
        ours, reference = _percentile(added, q), _percentile(direct, q)
        ratio = ours / reference if reference else None
        row: dict[str, Any] = {"name": f"inline completion: latency Crystal adds, p{q} of {RUNS}", "ours": ours,
                               "reference": reference, "unit": "ms", "ratio": ratio}
        if q == 95:
            row["target"] = {"ours_max": TARGET_MS}
            row["met"] = ours <= TARGET_MS
        print(f"{row['name']}: {ours:.2f} ms over the model server's own {reference:.2f} ms"
              + (f" (target <= {TARGET_MS:g} ms)" if q == 95 else ""))
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
