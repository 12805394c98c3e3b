"""One headless turn, side by side: ``crystal run`` against Claude Code, opencode and Codex.

Each agent runs for real (npm packages in build/agents, see bench/_support.py) against
the same loopback model server, in its own empty git repository with ``input.txt``.
The scripted model reads ``input.txt``, writes ``output.txt``, runs ``echo hi`` and
answers "done" — with each agent's own tool names (Codex has no file tools in this
configuration, so its three calls are ``exec_command``: ``cat``, ``printf >``, ``echo``).
Side requests an agent makes on its own (title naming, quota probes: requests without
tools) are answered with a short text and not counted as steps.

Figures (from the server's request log, ``time`` = request received, ``sent`` = last
byte of the reply written, and from the process):
- wall time of the process;
- start -> first model request (the first request to a model endpoint: crystal's probe
  of a ``baseUrl`` server for its context window comes before it and is not counted);
- CPU seconds of the agent's process tree when that request arrives (the work before it,
  whatever the machine's load and however many cores the agent spreads it over);
- per-tool-call gap: reply sent -> next request received, averaged over the three calls
  (the agent's own work between two model steps, tool run included); beside it the gap
  of the third call alone, a shell command for every agent (``echo hi``: crystal's runs
  in its sandbox, the machine's default mechanism, named in the row's note);
- max RSS of the agent's whole process tree, sampled every 5 ms.

Targets for ``crystal run``: gap under 20 ms and at most 0.15x the best of Claude Code
and Codex (SANDBOX-2 asked 0.2x), start to first request under
0.3 s, RSS under 120 MB; against Codex in the same run: start to first request
at most 0.6x, the whole turn's wall time 0.5x, max RSS 0.25x. Reference figures measured by the issue's author on this
machine type: gap 51 / 51 / 210 ms, wall 0.62 / 0.37 / 3.5 s, RSS 220 / 153 / 554 MB
(Claude Code / Codex / opencode); here they are measured again in the same run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._support import (
    CRYSTAL,
    Measured,
    crystal_env,
    npm_folder,
    row,
    run_measured,
    skipped_row,
    tree_cpu_seconds,
)
from crystal_kernel.testing.llm_server import PATHS, LLMServer

ROUNDS = int(os.environ.get("BENCH_AGENT_ROUNDS", "3"))
PROMPT = "Read input.txt, write output.txt, run echo hi, then say done."
WRITTEN = "written by the agent\n"
SIDE_TEXT = "Bench turn"


@dataclass
class Agent:
    name: str
    kind: str  # wire protocol: chat | anthropic | responses
    calls: Callable[[Path], list[tuple[str, dict[str, Any]]]]
    read_tool: str
    prepare: Callable[[Path, Path, LLMServer, Path], tuple[list[str], dict[str, str]]]
    rounds: int = ROUNDS
    runs: list[dict[str, float]] = field(default_factory=list)
    failure: str = ""


def tool_results(body: dict[str, Any], kind: str) -> int:
    """How many tool results the conversation in ``body`` already holds (= step index)."""
    if kind == "chat":
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    if kind == "anthropic":
        return sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                   for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result")
    items = body.get("input", [])
    return sum(1 for i in items if isinstance(i, dict) and str(i.get("type", "")).endswith("call_output"))


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools") or []}


def make_router(agent: Agent, workspace: Path) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    calls = agent.calls(workspace)

    def route(body: dict[str, Any], path: str) -> dict[str, Any]:
        if agent.read_tool not in tool_names(body):
            return {"text": SIDE_TEXT, "chunk": 64}
        step = tool_results(body, agent.kind)
        if step < len(calls):
            name, args = calls[step]
            return {"tool_calls": [{"name": name, "arguments": args, "id": f"call_{step}"}], "arg_chunk": 64}
        return {"text": "done", "chunk": 64}

    return route


# ----- the agents -------------------------------------------------------------------------------
def _crystal(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    argv = [str(CRYSTAL), "run", PROMPT, "--workspace", str(ws), "--approval", "full"]
    return argv, crystal_env(home, server.base_url)


def _base_env(home: Path, ws: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI", "ANTHROPIC", "CRYSTAL", "CODEX", "OPENCODE", "CLAUDE"))}
    # opencode takes its project folder from PWD, not from the process's cwd.
    env.update(HOME=str(home), PWD=str(ws), BENCH_KEY="bench-key")
    return env


def _claude(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    env = _base_env(home, ws)
    env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="bench-key", DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1")
    # --dangerously-skip-permissions is refused as root; allowing the three tools is enough.
    argv = [str(bin_dir / "claude"), "-p", PROMPT, "--allowedTools", "Read,Write,Bash",
            "--model", "claude-sonnet-4-5"]
    return argv, env


def _opencode(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    env = _base_env(home, ws)
    config = {"$schema": "https://opencode.ai/config.json", "model": "bench/gpt-4.1", "autoupdate": False,
              "share": "disabled",
              "provider": {"bench": {"npm": "@ai-sdk/openai-compatible", "name": "bench",
                                     "options": {"baseURL": server.base_url, "apiKey": "bench-key"},
                                     "models": {"gpt-4.1": {"name": "gpt-4.1"}}}}}
    path = home / "opencode.json"
    path.write_text(json.dumps(config))
    env.update(OPENCODE_CONFIG=str(path), OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1")
    return [str(bin_dir / "opencode"), "run", "-m", "bench/gpt-4.1", PROMPT], env


def _codex(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    env = _base_env(home, ws)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5"\nmodel_provider = "bench"\n\n[model_providers.bench]\nname = "bench"\n'
        f'base_url = "{server.base_url}"\nwire_api = "responses"\nenv_key = "BENCH_KEY"\n')
    env["CODEX_HOME"] = str(codex_home)
    argv = [str(bin_dir / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            PROMPT]
    return argv, env


AGENTS: list[Agent] = [
    Agent("crystal run", "chat", lambda ws: [("read", {"path": "input.txt"}),
                                             ("write", {"path": "output.txt", "content": WRITTEN}),
                                             ("bash", {"command": "echo hi"})], "read", _crystal),
    Agent("Claude Code", "anthropic", lambda ws: [("Read", {"file_path": str(ws / "input.txt")}),
                                                  ("Write", {"file_path": str(ws / "output.txt"), "content": WRITTEN}),
                                                  ("Bash", {"command": "echo hi", "description": "Print hi"})],
          "Read", _claude),
    Agent("Codex", "responses", lambda ws: [("exec_command", {"cmd": "cat input.txt"}),
                                            ("exec_command", {"cmd": f"printf '{WRITTEN.strip()}\\n' > output.txt"}),
                                            ("exec_command", {"cmd": "echo hi"})], "exec_command", _codex),
    Agent("opencode", "chat", lambda ws: [("read", {"filePath": str(ws / "input.txt")}),
                                          ("write", {"filePath": str(ws / "output.txt"), "content": WRITTEN}),
                                          ("bash", {"command": "echo hi", "description": "Print hi"})],
          "read", _opencode, rounds=max(1, min(ROUNDS, 2))),
]


def one_run(agent: Agent, bin_dir: Path | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as name:
        tmp = Path(name)
        ws, home = tmp / "ws", tmp / "home"
        ws.mkdir()
        home.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        (ws / "input.txt").write_text("some input\n")
        # The agent's CPU seconds (its whole process tree) when its first model request
        # arrives: unlike wall time, the work done before that request does not depend on
        # how busy a shared machine is, nor on how many cores it spreads over.
        spent: dict[str, float] = {}
        route = make_router(agent, ws)

        def router(body: dict[str, Any], path: str) -> dict[str, Any]:
            if path in PATHS and "cpu" not in spent and "pid" in spent:
                spent["cpu"] = tree_cpu_seconds(int(spent["pid"]))
            return route(body, path)

        with LLMServer(router=router, log_limit=2000) as server:
            argv, env = agent.prepare(ws, home, server, bin_dir or Path("."))
            done: Measured = run_measured(argv, cwd=ws, env=env, timeout=180,
                                          on_start=lambda pid: spent.__setitem__("pid", pid))
            log = [r for r in server.requests if r["path"] != "/_script"]
        main = [r for r in log if agent.read_tool in tool_names(r["body"])]
        if done.returncode != 0 or len(main) != 4 or not (ws / "output.txt").exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise RuntimeError(f"{agent.name}: turn did not complete (exit {done.returncode}, "
                               f"{len(main)} main requests, output.txt {'written' if (ws / 'output.txt').exists() else 'missing'}): {tail}")
        gaps = [main[i]["time"] - main[i - 1]["sent"] for i in range(1, 4)]
        # The first request to a model endpoint: a probe of the server (crystal asks a
        # baseUrl server for its context window) is not a model request.
        first = min(r["time"] for r in log if r["path"] in PATHS)
        return {"wall": done.wall, "first": first - done.started, "cpu_first": spent.get("cpu", float("nan")),
                "gap": statistics.mean(gaps) * 1000, "gap_shell": gaps[2] * 1000, "rss": done.peak_rss_mb,
                "requests": len(log)}


def measure(agents: list[tuple[Agent, Path | None]]) -> None:
    """Run the agents in turns (one run each per round, until each has its rounds), so
    that the load of a shared machine, which drifts over minutes, falls on all of them
    alike. An agent that fails once is not run again."""
    for round_no in range(max(agent.rounds for agent, _ in agents)):
        for agent, bin_dir in agents:
            if round_no >= agent.rounds or agent.failure:
                continue
            try:
                agent.runs.append(one_run(agent, bin_dir))
            except Exception as exc:
                agent.failure = str(exc)


def median(agent: Agent, key: str) -> float | None:
    return statistics.median(r[key] for r in agent.runs) if agent.runs else None


METRICS = [  # key, label, unit, target for crystal run
    ("gap", "per-tool-call gap", "ms", {"ours_max": 20}),
    # The third call is a shell command for every agent (echo hi): under crystal's sandbox.
    ("gap_shell", "gap of the shell call (echo hi)", "ms", None),
    ("first", "start to first model request", "s", {"ours_max": 0.3}),
    ("cpu_first", "CPU seconds to first model request", "s", None),
    ("wall", "wall time of one turn (3 tool calls)", "s", None),
    ("rss", "max RSS of the process tree", "MB", {"ours_max": 120}),
]
# The rows against Codex, measured side by side in the same run: start at most
# 0.6x, the whole turn 0.5x, memory 0.25x. These rows carry this target instead of the
# figure's own one above.
CODEX_RATIO = {"first": 0.6, "wall": 0.5, "rss": 0.25}


IMPORTS = ("import gc; gc.disable(); from crystal_kernel.cli import skip_unused_sdk_modules; skip_unused_sdk_modules(); "
           "from crystal_kernel.providers.deferred_init import defer_package_inits; defer_package_inits(); "
           "import crystal_kernel.cli, crystal_kernel.host.bootstrap, crystal_kernel.providers.openai_chat")


def import_time(runs: int = 5) -> float:
    """Median time to import, as ``crystal run`` does, what its first request needs."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", IMPORTS], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sandbox_mechanism() -> str:
    """Which sandbox ``crystal run``'s bash calls run under in this bench (SANDBOX-2): the
    default of this machine, asked in the environment the crystal child gets (no
    ``CRYSTAL_SANDBOX_MECHANISM``: bubblewrap where it works, else Landlock)."""
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as name:
        env = crystal_env(Path(name), "http://127.0.0.1:9")
        done = subprocess.run([sys.executable, "-c", "from crystal_kernel.core.config import load_config; "
                               "from crystal_kernel.jobs.sandbox import mechanism, sandbox_state; "
                               "print(mechanism() if sandbox_state(load_config()) == 'on' else 'none')"],
                              env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


# The per-tool-call gap against the best of these: at most 0.15x (SANDBOX-2 asked
# 0.2x; docs/benchmarks.md has the history).
GAP_ANCHORS = ("Claude Code", "Codex")
GAP_RATIO = 0.15


def main() -> list[dict[str, Any]]:
    mechanism = sandbox_mechanism()
    bin_dir, reason = npm_folder()
    ours, *others = AGENTS
    if bin_dir is None:
        for agent in others:
            agent.failure = reason
    measure([(ours, None), *((agent, bin_dir / "node_modules" / ".bin") for agent in others if bin_dir is not None)])
    if not ours.runs:
        raise RuntimeError(ours.failure)
    for agent in AGENTS:
        if agent.runs:
            print(f"  {agent.name:12} " + "  ".join(f"{k} {median(agent, k):.3f}" for k, *_ in METRICS)
                  + f"  ({len(agent.runs)} runs, {agent.runs[0]['requests']} requests each)")
        else:
            print(f"  {agent.name:12} not measured: {agent.failure}")
    rows: list[dict[str, Any]] = []
    imports = import_time()
    for key, label, unit, target in METRICS:
        if target:
            # crystal's own figure against its target, whether or not the others ran.
            rows.append(row(f"agents: {label}, crystal run", median(ours, key), None, unit, target))
            if key == "first" and rows[-1]["ours"] > target["ours_max"]:
                rows[-1]["note"] = (f"starting Python and importing what the first request needs (host modules, the "
                                    f"openai SDK) takes "
                                    f"{imports:.3f} s of it in a fresh interpreter (same run; "
                                    "docs/benchmarks.md has the per-module breakdown)")
        for agent in others:
            name = f"agents: {label}, crystal vs {agent.name}"
            against = {"ratio_max": CODEX_RATIO[key]} if agent.name == "Codex" and key in CODEX_RATIO else target
            if not agent.runs:
                rows.append(skipped_row(name, unit, agent.failure, None, against))
                continue
            rows.append(row(name, median(ours, key), median(agent, key), unit, against))
        if key == "gap":
            rows[-1 - len(others)]["note"] = f"crystal run's bash call ran under {mechanism} (this machine's default)"
            anchors = [(median(agent, key), agent.name) for agent in others if agent.name in GAP_ANCHORS and agent.runs]
            name = f"agents: {label}, crystal vs the best of {' and '.join(GAP_ANCHORS)}"
            if not anchors:
                why = "; ".join(f"{agent.name}: {agent.failure}" for agent in others if agent.name in GAP_ANCHORS)
                rows.append(skipped_row(name, unit, why, None, {"ratio_max": GAP_RATIO}))
            else:
                best, who = min(anchors)
                rows.append(row(name, median(ours, key), best, unit, {"ratio_max": GAP_RATIO},
                                f"{who} was the best; sandbox: {mechanism}"))
    return rows
