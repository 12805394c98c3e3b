"""The Crystal kernel against a stock ipykernel.

Rows:
- kernel start to idle: ``KernelManager.start_kernel`` until the kernel answers
  ``kernel_info`` (``wait_for_ready``), for the Crystal kernel and for a stock
  ipykernel started the same way from the same Python. Target: under 1.5x.
- first turn: the first cell of a fresh Crystal kernel (opening the session, the
  provider's SDK, one streamed reply from the loopback server) against a stock
  ipykernel's first cell that imports the same SDK and makes the same streamed request.
  Reported against a 1.5x target too (the work is the same; the difference is our host).

Each side runs RUNS times, interleaved; the fastest run of each is compared (the
machine may be shared; the minimum is the least disturbed measurement).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from crystal_kernel.jupyter.driver import KernelDriver
from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.llm_server import LLMServer

RUNS = 5
KEY_ENV = "CRYSTAL_BENCH_KEY"
STOCK_CELL = """
import openai
client = openai.OpenAI(base_url={url!r}, api_key="k")
text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
    model="gpt-4.1", messages=[{{"role": "user", "content": "hi"}}], stream=True) if c.choices)
print(text)
"""


def _specs(root: Path) -> Path:
    kernels = root / "kernels"
    (kernels / "crystal").mkdir(parents=True)
    (kernels / "crystal" / "kernel.json").write_text(json.dumps(kernel_json(python=sys.executable)))
    (kernels / "stock").mkdir()
    (kernels / "stock" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    return kernels


def _env(root: Path, server: LLMServer) -> dict[str, str]:
    home = root / "home"
    (home / ".crystal").mkdir(parents=True, exist_ok=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False}))
    env = dict(os.environ)
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
                "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url,
                "CRYSTAL_API_KEY_ENV": KEY_ENV, KEY_ENV: "k"})
    return env


def _run_once(kernels: Path, name: str, env: dict[str, str], cwd: Path, cell: str) -> tuple[float, float]:
    """(start-to-idle seconds, first-cell seconds)."""
    km = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    started = time.perf_counter()
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        ready = time.perf_counter() - started
        run = KernelDriver(kc).execute(cell, timeout=60)
        if run.status != "ok":
            raise RuntimeError(f"{name} first cell failed: {run.texts()} {run.streams}")
        return ready, run.seconds
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, LLMServer() as server:
        root = Path(tmp)
        kernels = _specs(root)
        env = _env(root, server)
        workspace = root / "ws"
        workspace.mkdir()
        stock_cell = STOCK_CELL.format(url=server.base_url)
        ours_ready, ref_ready, ours_turn, ref_turn = [], [], [], []
        for _ in range(RUNS):
            server.add({"text": "Hello from the bench."}, {"text": "Hello from the bench."})
            ready, turn = _run_once(kernels, "stock", env, workspace, stock_cell)
            ref_ready.append(ready)
            ref_turn.append(turn)
            ready, turn = _run_once(kernels, "crystal", env, workspace, "Say hello")
            ours_ready.append(ready)
            ours_turn.append(turn)
        rows.append({"name": "kernel: start to idle vs stock ipykernel", "ours": min(ours_ready),
                     "reference": min(ref_ready), "unit": "s", "ratio": min(ours_ready) / min(ref_ready),
                     "target": {"ratio_max": 1.5}})
        rows.append({"name": "kernel: first turn vs stock cell doing the request", "ours": min(ours_turn),
                     "reference": min(ref_turn), "unit": "s", "ratio": min(ours_turn) / min(ref_turn),
                     "target": {"ratio_max": 1.5}})
    for row in rows:
        row["met"] = row["ratio"] <= row["target"]["ratio_max"]
        print(f"{row['name']:55} ours {row['ours']:.3f} ref {row['reference']:.3f} {row['unit']} "
              f"ratio {row['ratio']:.2f} met {row['met']}")
    return rows


if __name__ == "__main__":
    main()
