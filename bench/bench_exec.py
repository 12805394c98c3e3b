"""Host overhead of calling an exec tool (EX-*), against ``subprocess.run`` of the same
command with the same stdin.

Our side is the whole call a model's tool call costs: argument check, argv mapping,
executable resolution, environment, lazy data folders, the child under its timeout
with bounded readers, and parsing the content JSON into a result. The reference runs
the same child with ``subprocess.run(argv, input=…, capture_output=True, cwd=…,
env=…)``: same argv, working folder, environment (the five CRYSTAL_* variables) and
stdin, the environment built once outside the timing. Rounds alternate
between the two sides; the figure is the lowest time of each side (the machine is
shared, so medians mostly measure other load). Target: under 1.15x for a
tool that exits at once.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crystal_kernel.core.config import load_config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.host.tool_sources import discover_external_tools
from crystal_kernel.testing.scripted import ScriptedProvider

ARGS = {"q": "hello", "n": 3}


def _sets(home: Path) -> None:
    echo = shutil.which("echo") or "/bin/echo"
    folder = home / "tools" / "bench"
    folder.mkdir(parents=True)
    (folder / "tools.json").write_text(json.dumps({"tools": [
        # A native executable that exits at once (reads nothing, prints one JSON object).
        {"name": "instant", "command": [echo, '{"text": "ok"}']},
        # A Python tool that reads its JSON arguments and answers.
        {"name": "pytool", "command": [sys.executable, "-S", "-c",
                                       "import json,sys; a=json.load(sys.stdin); print(json.dumps({'text': a['q']}))"],
         "argv": {"q": "--q"}},
    ]}))


async def _measure(tool, ctx, rounds: int) -> tuple[float, float]:
    payload = json.dumps(ARGS).encode()
    argv = tool.final_argv(ARGS)
    cwd = str(ctx.workspace)
    env = tool.child_env(ctx)  # the same child: same argv, cwd, environment and stdin
    ours, ref = [], []
    for _ in range(3):  # warm-up both paths
        await tool.run(tool.parse(ARGS), ctx)
        # The reference is measured exactly as a caller without an event loop runs it.
        subprocess.run(argv, input=payload, capture_output=True, cwd=cwd, env=env)  # noqa: ASYNC221
    for _ in range(rounds):
        start = time.perf_counter()
        result = await tool.run(tool.parse(ARGS), ctx)
        ours.append(time.perf_counter() - start)
        assert result.ok, result.text
        start = time.perf_counter()
        done = subprocess.run(argv, input=payload, capture_output=True, cwd=cwd, env=env)  # noqa: ASYNC221
        json.loads(done.stdout)
        ref.append(time.perf_counter() - start)
    return min(ours), min(ref)


async def _run() -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        workspace.mkdir()
        _sets(home)
        config = load_config(home, overrides={"approval": "full"})
        session = Session(workspace=workspace, config=config, provider=ScriptedProvider([]), person_present=False)
        ctx = session.tool_context(NoPerson(), images_ok=True)
        tools, notes = await discover_external_tools(home, workspace)
        assert not notes, notes
        by_name = {t.name: t for t in tools}
        for name, label, rounds in (("instant", "a native tool that exits at once", 400),
                                    ("pytool", "a Python tool", 80)):
            ours, ref = await _measure(by_name[name], ctx, rounds)
            rows.append({"name": f"exec: {label} vs subprocess.run", "ours": ours * 1000, "reference": ref * 1000,
                         "unit": "ms", "ratio": ours / ref, "target": {"ratio_max": 1.15}})
        start = time.perf_counter()
        for _ in range(20):
            await discover_external_tools(home, workspace)
        rows.append({"name": "exec: discover sets (per session start)", "ours": (time.perf_counter() - start) / 20 * 1000,
                     "reference": 5.0, "unit": "ms", "ratio": None, "target": {"ours_max": 5.0}})
        await session.close()
    return rows


def main() -> list[dict]:
    rows = asyncio.run(_run())
    for r in rows:
        met = (r["ratio"] <= r["target"]["ratio_max"]) if "ratio_max" in r["target"] else r["ours"] <= r["target"]["ours_max"]
        r["met"] = met
        ratio = f"{r['ratio']:.3f}x" if r["ratio"] is not None else "-"
        print(f"{r['name']:58} ours {r['ours']:8.3f} {r['unit']}  reference {r['reference']:8.3f} {r['unit']}  "
              f"ratio {ratio}  {'met' if met else 'NOT met'}")
    return rows


if __name__ == "__main__":
    main()
