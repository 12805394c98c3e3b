"""Helpers shared by the side-by-side benchmarks (not a benchmark itself).

- :func:`npm_folder`: the npm packages the benchmarks compare against (Claude Code,
  opencode, Codex CLI and the ``tiktoken`` package whose ``o200k_base`` file is read
  offline) live in ``build/agents`` (gitignored). They are installed on first use with
  ``npm install`` and never committed.
- :func:`crystal_env`: the environment of a ``crystal`` child pointed at a loopback
  model server, with Home in a temp folder.
- :func:`run_measured`: run a child process, sampling its tree's RSS, and return wall
  time and the peak RSS of the whole tree.
- :func:`skipped_row`: a table row that says why a reference could not be measured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "build" / "agents"
NPM_PACKAGES = ["@anthropic-ai/claude-code", "opencode-ai", "@openai/codex", "tiktoken"]
CRYSTAL = Path(sys.executable).parent / "crystal"


def npm_folder(install: bool = True) -> tuple[Path | None, str]:
    """``build/agents`` with the npm packages installed, or ``(None, reason)``."""
    bin_dir = AGENTS / "node_modules" / ".bin"
    wanted = [bin_dir / "claude", bin_dir / "opencode", bin_dir / "codex",
              AGENTS / "node_modules" / "tiktoken" / "encoders" / "o200k_base.json"]
    if all(p.exists() for p in wanted):
        return AGENTS, ""
    if not install:
        return None, "npm packages are not installed in build/agents"
    if shutil.which("npm") is None:
        return None, "npm is not installed on this machine"
    AGENTS.mkdir(parents=True, exist_ok=True)
    if not (AGENTS / "package.json").exists():
        (AGENTS / "package.json").write_text('{"name": "bench-agents", "private": true}\n')
    try:
        # A registry that does not answer fails each fetch after a minute rather than
        # npm's default retries with back-off: the row is then skipped with the reason.
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--fetch-retries=1",
                               "--fetch-timeout=60000", *NPM_PACKAGES], cwd=AGENTS,
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return None, "npm install timed out after 15 minutes"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"npm install failed: {last[:160]}"
    return AGENTS, ""


def crystal_env(home: Path, base_url: str, provider: str = "openai", model: str = "gpt-4.1") -> dict[str, str]:
    """A ``crystal`` child talking to ``base_url`` with a Home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    (home / ".crystal").mkdir(parents=True, exist_ok=True)
    config = home / ".crystal" / "config.json"
    if not config.exists():
        config.write_text(json.dumps({"topicNaming": False}))
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": provider,
                "CRYSTAL_MODEL": model, "CRYSTAL_BASE_URL": base_url, "CRYSTAL_API_KEY_ENV": "BENCH_KEY",
                "BENCH_KEY": "bench-key"})
    return env


@dataclass
class Measured:
    returncode: int
    wall: float
    started: float  # time.time() at spawn, comparable with the model server's log times
    peak_rss_mb: float
    stdout: str
    stderr: str


def _tree_rss(proc: psutil.Process) -> int:
    """RSS of ``proc`` and its descendants. A child caught between fork and exec still
    shows its parent's command line and (shared) memory; it is skipped, or every spawn
    would count the parent twice."""
    try:
        members = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    cmdlines: dict[int, list[str]] = {}
    sizes: list[tuple[psutil.Process, int]] = []
    for member in members:
        try:
            cmdlines[member.pid] = member.cmdline()
            sizes.append((member, member.memory_info().rss))
        except psutil.Error:
            pass
    total = 0
    for member, rss in sizes:
        try:
            parent = member.ppid()
        except psutil.Error:
            continue
        if member.pid != proc.pid and cmdlines.get(parent) == cmdlines.get(member.pid):
            continue
        total += rss
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its descendants, the
    children it already reaped included; NaN when the process is gone."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return float("nan")
    total = 0.0
    for member in members:
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def run_measured(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120.0,
                 stdin: str | None = None, on_start: Callable[[int], object] | None = None) -> Measured:
    """Run ``argv``; sample the RSS of its process tree every 5 ms; kill it at ``timeout``.
    ``on_start`` gets the child's pid as soon as it is spawned."""
    started_wall = time.time()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    if on_start is not None:
        on_start(proc.pid)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            handle = psutil.Process(proc.pid)
        except psutil.Error:
            return
        while not stop.is_set():
            peak = max(peak, _tree_rss(handle))
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        err += f"\n[bench: killed after {timeout} s]"
    wall = time.perf_counter() - start
    stop.set()
    sampler.join(1)
    try:  # nothing the child started may linger
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass
    return Measured(proc.returncode, wall, started_wall, peak / 2**20, out, err)


def skipped_row(name: str, unit: str, reason: str, reference: float | None = None,
                target: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "ours": None, "reference": reference, "unit": unit, "ratio": None,
            "target": target, "met": None, "skipped": reason}


def row(name: str, ours: float | None, reference: float | None, unit: str,
        target: dict[str, Any] | None = None, note: str | None = None) -> dict[str, Any]:
    ratio = ours / reference if ours is not None and reference else None
    out: dict[str, Any] = {"name": name, "ours": ours, "reference": reference, "unit": unit, "ratio": ratio,
                           "target": target, "met": None}
    if note:
        out["note"] = note
    return out
