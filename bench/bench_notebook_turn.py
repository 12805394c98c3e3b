"""Per-turn overhead in a notebook: a Crystal kernel cell against Jupyter AI's ``%%ai``
magic and against a bare SDK call, all three on the same loopback model server with the
same scripted reply (a ~1,000-character Markdown answer, streamed in 16-character
pieces). Each cell is timed through jupyter_client from execute_request to the
kernel's idle status (KernelDriver.execute), median of ROUNDS cells after a warm-up.

- Crystal: the ``crystal`` kernel (a Work turn, the answer rendered as Markdown);
- ``%%ai``: a plain ipykernel with ``%load_ext jupyter_ai_magic_commands`` (the package
  that ships ``%%ai`` in Jupyter AI 3; it calls litellm, non-streaming), model
  ``openai/gpt-4.1`` with ``--api-base`` at the loopback server;
- bare SDK: the same ipykernel, a cell that streams the answer with the openai SDK
  (client created in an earlier cell) and prints each piece (ipykernel batches the
  prints into stream messages, as it would for any print loop).

jupyter-ai-magic-commands is installed in .venv for this benchmark only (it is not a
project dependency); when it is missing the ``%%ai`` rows are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from bench._support import row, skipped_row
from crystal_kernel.jupyter.driver import KernelDriver
from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.llm_server import LLMServer

ROUNDS = int(os.environ.get("BENCH_NOTEBOOK_ROUNDS", "15"))
WARMUP = 2
ANSWER = "## Result\n\n" + " ".join(f"The figure number {i} looks right." for i in range(30))
REPLY = {"text": ANSWER, "chunk": 16}


def _start(tmp: Path, name: str, spec: dict[str, Any], env: dict[str, str], cwd: Path) -> tuple[KernelManager, KernelDriver]:
    folder = tmp / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    km = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder.parent)]))
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, KernelDriver(kc)


def _stop(km: KernelManager, driver: KernelDriver) -> None:
    driver.kc.stop_channels()
    km.shutdown_kernel(now=True)


def _env(tmp: Path, server: LLMServer) -> dict[str, str]:
    home = tmp / "home"
    (home / ".crystal").mkdir(parents=True, exist_ok=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI", "ANTHROPIC"))}
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
                "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url,
                "CRYSTAL_API_KEY_ENV": "BENCH_KEY", "BENCH_KEY": "bench-key", "OPENAI_API_KEY": "bench-key",
                # litellm fetches a price table from GitHub at import unless told to use its copy.
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                "JPY_SESSION_NAME": str(tmp / "ws" / "bench.ipynb")})
    return env


def _timed(driver: KernelDriver, server: LLMServer, code: str, check: str) -> list[float]:
    times = []
    for i in range(WARMUP + ROUNDS):
        server.add(REPLY)
        run = driver.execute(code, timeout=120)
        # KernelDriver keeps display_data; %%ai returns its answer as the execute_result.
        shown = run.streams + "".join(json.dumps(d) for d in run.outputs()) + "".join(
            json.dumps(m["content"].get("data", {})) for m in run.messages if m["msg_type"] == "execute_result")
        if run.status != "ok" or check not in shown:
            raise RuntimeError(f"cell failed ({run.status}): {(run.streams + ' ' + ' '.join(run.texts())).strip()[:300]}")
        if i >= WARMUP:
            times.append(run.seconds)
    return times


def crystal_cells(tmp: Path, server: LLMServer, env: dict[str, str]) -> list[float]:
    km, driver = _start(tmp, "crystal", kernel_json([], python=sys.executable), env, tmp / "ws")
    try:
        return _timed(driver, server, "Summarise the figures.", "figure number 29")
    finally:
        _stop(km, driver)


def ipykernel_cells(tmp: Path, server: LLMServer, env: dict[str, str]) -> tuple[list[float], list[float] | str]:
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3", "language": "python"}
    km, driver = _start(tmp, "python3", spec, env, tmp / "ws")
    try:
        setup = driver.execute(f"from openai import OpenAI\nclient = OpenAI(base_url={server.base_url!r}, "
                               "api_key='bench-key')", timeout=60)
        assert setup.status == "ok", setup.texts()
        bare = _timed(driver, server, "stream = client.chat.completions.create(model='gpt-4.1', stream=True, "
                      "messages=[{'role': 'user', 'content': 'Summarise the figures.'}])\n"
                      "for chunk in stream:\n"
                      "    if chunk.choices and chunk.choices[0].delta.content:\n"
                      "        print(chunk.choices[0].delta.content, end='')\n", "figure number 29")
        if find_spec("jupyter_ai_magic_commands") is None:
            return bare, "jupyter-ai-magic-commands is not installed (pip install it into .venv to compare)"
        loaded = driver.execute("%load_ext jupyter_ai_magic_commands", timeout=120)
        if loaded.status != "ok":
            return bare, f"%load_ext jupyter_ai_magic_commands failed: {(loaded.texts() or [''])[-1][:160]}"
        try:
            magic = _timed(driver, server, f"%%ai openai/gpt-4.1 --api-base {server.base_url}\nSummarise the figures.",
                           "figure number 29")
        except RuntimeError as exc:
            return bare, f"%%ai could not be pointed at the loopback server: {exc}"
        return bare, magic
    finally:
        _stop(km, driver)


def main() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-nb-") as name, LLMServer() as server:
        tmp = Path(name)
        (tmp / "ws").mkdir()
        env = _env(tmp, server)
        ours = crystal_cells(tmp, server, env)
        bare, magic = ipykernel_cells(tmp, server, env)
    m_ours, m_bare = statistics.median(ours), statistics.median(bare)
    print(f"  crystal cell {m_ours * 1000:.1f} ms, bare SDK cell {m_bare * 1000:.1f} ms", end="")
    rows = [row("notebook turn: crystal cell vs bare SDK cell", m_ours * 1000, m_bare * 1000, "ms"),
            row("notebook turn: crystal overhead over bare SDK", (m_ours - m_bare) * 1000, None, "ms",
                {"ours_max": 50})]
    if isinstance(magic, str):
        print(f"; %%ai skipped: {magic}")
        rows.insert(1, skipped_row("notebook turn: crystal cell vs %%ai cell", "ms", magic))
        return rows
    m_magic = statistics.median(magic)
    print(f", %%ai cell {m_magic * 1000:.1f} ms")
    rows.insert(1, row("notebook turn: crystal cell vs %%ai cell", m_ours * 1000, m_magic * 1000, "ms",
                       {"ratio_max": 1.0},
                       note=None if m_ours <= m_magic else
                       f"of the {(m_ours - m_magic) * 1000:.1f} ms, {(m_bare - m_magic) * 1000:.1f} ms is streaming "
                       "itself (the bare SDK cell streams the same reply; %%ai asks for one non-streamed reply) and "
                       f"{(m_ours - m_bare) * 1000:.1f} ms is Crystal's own turn over that bare streaming cell"))
    rows[2]["reference"] = (m_magic - m_bare) * 1000
    rows[2]["ratio"] = (m_ours - m_bare) / (m_magic - m_bare) if m_magic > m_bare else None
    rows[2]["note"] = "reference: %%ai overhead over the same bare SDK cell"
    return rows
