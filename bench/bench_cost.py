"""Cost: what each agent sends to the model over one scripted 10-step task.

Each agent (``crystal run``, Claude Code, Codex, opencode; set up as in
bench/bench_agents.py) runs one task against the same loopback model server, in its own
git repository holding a tiny calculator whose ``add`` subtracts. The scripted model
makes the same ten steps with each agent's own tool names, then answers:

1. read ``README.md``          6. run the test again (passes)
2. grep ``def add``            7. grep ``TODO``
3. read ``calc.py``            8. write ``NOTES.md``
4. run the test (fails)        9. edit ``NOTES.md``
5. edit ``calc.py`` (the fix)  10. run ``git status --short``

Codex in this configuration offers ``exec_command`` only, so its steps are shell
commands (``cat``, ``grep -rn``, ``sed -i``, ``printf >``). The task must complete
(eleven main requests, ``calc.py`` fixed, ``NOTES.md`` written) or the row says why.

Figures, from the server's log of every model request the agent made (side requests
such as title naming included: they are sent too):
- bytes: the request bodies as received;
- input tokens: the model-visible fields of each body (``system``/``instructions``,
  ``tools``, ``messages``/``input``), each as compact JSON, counted with tiktoken's
  ``o200k_base`` for every agent (bench/bench_tokens.py builds it offline);
- prompt caching: Anthropic Messages requests are checked for ``cache_control``
  breakpoints (the wire's only way to cache); OpenAI caches a repeated prefix on its
  own (Chat Completions and Responses carry no marker; ``prompt_cache_key`` is noted
  when sent).

``crystal run`` is measured on Chat Completions (the wire opencode uses) and on
Anthropic Messages (the wire Claude Code uses, where its breakpoints show).
Target: crystal run's tokens at most 0.6x the leanest other agent's.

Tokens as billed (bench/_billing.py): each request's input split into what the provider's
prompt cache serves again (OpenAI on its own, Anthropic at ``cache_control``
breakpoints), what it writes and what it bills in full; the share of each request that
repeats the previous request's prefix; and the task's input cost at each anchor's
model's published prices, crystal run priced on the same provider and prices as the
anchor (Chat Completions for opencode and Codex, Anthropic Messages for Claude Code).
Target: crystal's billed input cost at most 0.5x the cheapest anchor's.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._billing import PRICES, Bill, bill_of
from bench._support import crystal_env, npm_folder, row, run_measured, skipped_row
from bench.bench_agents import PROMPT, Agent, _claude, _codex, _crystal, _opencode, make_router, tool_names
from bench.bench_tokens import compact, count, o200k_base
from crystal_kernel.testing.llm_server import PATHS, LLMServer

TASK = ("add(2, 3) in calc.py gives the wrong answer: find the bug, fix it, check the test passes "
        "and note the fix in NOTES.md.")
TARGET = 0.6
BILLED_TARGET = 0.5
# Each anchor: the model it is configured with (whose prices bill both it and crystal)
# and which of crystal's runs speaks that provider's wire.
ANCHOR_MODELS = {"opencode": ("gpt-4.1", "crystal run"), "Codex": ("gpt-5", "crystal run"),
                 "Claude Code": ("claude-sonnet-4-5", "crystal run (anthropic)")}
STEPS = 10
FILES = {
    "README.md": "# calc\n\nA tiny calculator. Run the tests with `python3 test_calc.py`.\n",
    "calc.py": '"""Small arithmetic helpers."""\n\n\ndef add(a, b):\n    return a - b\n\n\n'
               "def mul(a, b):\n    # TODO: accept more than two numbers\n    return a * b\n",
    "test_calc.py": 'from calc import add, mul\n\nassert mul(2, 3) == 6\nassert add(2, 3) == 5, f"add(2, 3) gave {add(2, 3)}"\n'
                    'print("all tests passed")\n',
}
NOTE = "add() subtracted its arguments; fixed.\n"
NOTE_OLD, NOTE_NEW = "fixed.", "fixed (test_calc.py passes)."
TEST = "python3 test_calc.py"
MODEL_VISIBLE = ("system", "instructions", "tools", "messages", "input")

Calls = list[tuple[str, dict[str, Any]]]


def _steps(read: Callable[[str], tuple[str, dict[str, Any]]], grep: Callable[[str], tuple[str, dict[str, Any]]],
           edit: Callable[[str, str, str], tuple[str, dict[str, Any]]],
           write: Callable[[str, str], tuple[str, dict[str, Any]]],
           bash: Callable[[str], tuple[str, dict[str, Any]]]) -> Calls:
    """The ten steps in one agent's vocabulary."""
    return [read("README.md"), grep("def add"), read("calc.py"), bash(TEST),
            edit("calc.py", "return a - b", "return a + b"), bash(TEST), grep("TODO"),
            write("NOTES.md", NOTE), edit("NOTES.md", NOTE_OLD, NOTE_NEW), bash("git status --short")]


def crystal_calls(ws: Path) -> Calls:
    return _steps(lambda p: ("read", {"path": p}), lambda q: ("grep", {"pattern": q}),
                  lambda p, o, n: ("edit", {"path": p, "old_string": o, "new_string": n}),
                  lambda p, c: ("write", {"path": p, "content": c}), lambda c: ("bash", {"command": c}))


def claude_calls(ws: Path) -> Calls:
    return _steps(lambda p: ("Read", {"file_path": str(ws / p)}),
                  lambda q: ("Grep", {"pattern": q, "output_mode": "content", "-n": True}),
                  lambda p, o, n: ("Edit", {"file_path": str(ws / p), "old_string": o, "new_string": n}),
                  lambda p, c: ("Write", {"file_path": str(ws / p), "content": c}),
                  lambda c: ("Bash", {"command": c, "description": "Run " + c.split()[0]}))


def codex_calls(ws: Path) -> Calls:
    def sh(cmd: str) -> tuple[str, dict[str, Any]]:
        return "exec_command", {"cmd": cmd}

    return _steps(lambda p: sh(f"cat {p}"), lambda q: sh(f"grep -rn '{q}' ."),
                  lambda p, o, n: sh(f"sed -i 's/{o}/{n}/' {p}"),
                  lambda p, c: sh(f"printf '%s\\n' '{c.strip()}' > {p}"), sh)


def opencode_calls(ws: Path) -> Calls:
    return _steps(lambda p: ("read", {"filePath": str(ws / p)}), lambda q: ("grep", {"pattern": q}),
                  lambda p, o, n: ("edit", {"filePath": str(ws / p), "oldString": o, "newString": n}),
                  lambda p, c: ("write", {"filePath": str(ws / p), "content": c}),
                  lambda c: ("bash", {"command": c, "description": "Run " + c.split()[0]}))


def _task(prepare: Callable[..., tuple[list[str], dict[str, str]]],
          swaps: dict[str, str] | None = None) -> Callable[..., tuple[list[str], dict[str, str]]]:
    """bench_agents' set-up of an agent, with the task's prompt (and ``swaps``) in its argv."""
    table = {PROMPT: TASK, **(swaps or {})}

    def prepare_task(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
        argv, env = prepare(ws, home, server, bin_dir)
        return [table.get(arg, arg) for arg in argv], env

    return prepare_task


def _crystal_anthropic(ws: Path, home: Path, server: LLMServer, bin_dir: Path) -> tuple[list[str], dict[str, str]]:
    argv, _ = _crystal(ws, home, server, bin_dir)
    return argv, crystal_env(home, server.url, provider="anthropic", model="claude-sonnet-4-5")


@dataclass
class Cost:
    """What one agent sent over the task: the server's log of it and the sums."""

    log: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    main: int = 0
    bytes: int = 0
    tokens: int = 0
    main_tokens: int = 0
    marked: int = 0  # requests carrying at least one cache_control breakpoint
    cache_key: bool = False
    wire: str = ""
    per_request: list[int] = field(default_factory=list)


def visible_tokens(body: dict[str, Any], counter: Callable[[str], int] = count) -> int:
    """Tokens of the fields the model reads, each as compact JSON (a string as it is)."""
    return sum(counter(value if isinstance(value, str) else compact(value))
               for key, value in body.items() if key in MODEL_VISIBLE)


def breakpoints(value: Any) -> int:
    """How many ``cache_control`` markers ``value`` holds, at any depth."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(breakpoints(v) for v in value.values())
    if isinstance(value, list):
        return sum(breakpoints(v) for v in value)
    return 0


def tally(log: list[dict[str, Any]], main_tool: str, counter: Callable[[str], int] = count) -> Cost:
    """Sum the model requests in the server's ``log`` (other paths, such as Ollama's
    ``/api/show`` probe, are not model requests). ``counter``: tokens of a text."""
    cost = Cost(log=[e for e in log if e["path"] in PATHS])
    for entry in cost.log:
        body = entry["body"]
        tokens = visible_tokens(body, counter)
        cost.requests += 1
        cost.bytes += int(entry["bytes"])
        cost.tokens += tokens
        cost.per_request.append(tokens)
        cost.wire = PATHS[entry["path"]]
        cost.marked += breakpoints(body) > 0
        cost.cache_key = cost.cache_key or "prompt_cache_key" in body
        if main_tool in tool_names(body):
            cost.main += 1
            cost.main_tokens += tokens
    return cost


def caching(cost: Cost) -> str:
    if cost.wire == "anthropic":
        return f"cache_control on {cost.marked}/{cost.requests} requests"
    key = ", prompt_cache_key sent" if cost.cache_key else ""
    return f"OpenAI automatic (no marker on this wire){key}"


def run_task(agent: Agent, bin_dir: Path | None, counter: Callable[[str], int] = count) -> Cost:
    """Run the task once; raise with the reason when it did not complete."""
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as name:
        tmp = Path(name)
        ws, home = tmp / "ws", tmp / "home"
        ws.mkdir()
        home.mkdir()
        for file, text in FILES.items():
            (ws / file).write_text(text)
        for argv in (["git", "init", "-q"], ["git", "add", "."],
                     ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "calc"]):
            subprocess.run(argv, cwd=ws, check=True)
        with LLMServer(router=make_router(agent, ws), log_limit=2000) as server:
            argv, env = agent.prepare(ws, home, server, bin_dir or Path("."))
            done = run_measured(argv, cwd=ws, env=env, timeout=300)
            log = server.requests
        cost = tally(log, agent.read_tool, counter)
        fixed = "return a + b" in (ws / "calc.py").read_text()
        noted = (ws / "NOTES.md").exists() and NOTE_NEW in (ws / "NOTES.md").read_text()
        if done.returncode != 0 or cost.main != STEPS + 1 or not fixed or not noted:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise RuntimeError(f"{agent.name}: task did not complete (exit {done.returncode}, {cost.main} main "
                               f"requests of {STEPS + 1}, calc.py {'fixed' if fixed else 'not fixed'}, NOTES.md "
                               f"{'noted' if noted else 'missing or unchanged'}): {tail}")
        return cost


AGENTS: list[Agent] = [
    Agent("crystal run", "chat", crystal_calls, "read", _task(_crystal)),
    Agent("crystal run (anthropic)", "anthropic", crystal_calls, "read", _task(_crystal_anthropic)),
    Agent("Claude Code", "anthropic", claude_calls, "Read",
          _task(_claude, {"Read,Write,Bash": "Read,Grep,Edit,Write,Bash"})),
    Agent("Codex", "responses", codex_calls, "exec_command", _task(_codex)),
    Agent("opencode", "chat", opencode_calls, "read", _task(_opencode)),
]


def main() -> list[dict[str, Any]]:
    try:
        o200k_base()
    except Exception as exc:
        return [skipped_row("cost: input tokens over a 10-step task, crystal vs leanest", "tok",
                            f"no offline o200k_base: {exc}", None, {"ratio_max": TARGET})]
    bin_dir, reason = npm_folder()
    costs: dict[str, Cost] = {}
    failures: dict[str, str] = {}
    for agent in AGENTS:
        if not agent.name.startswith("crystal") and bin_dir is None:
            failures[agent.name] = reason
            continue
        try:
            costs[agent.name] = run_task(agent, bin_dir / "node_modules" / ".bin" if bin_dir else None)
        except Exception as exc:
            failures[agent.name] = str(exc)
    for agent in AGENTS:
        if agent.name in costs:
            c = costs[agent.name]
            print(f"  {agent.name:24} {c.tokens:7} tok {c.bytes:8} B  {c.requests} requests ({c.main} main, "
                  f"{c.main_tokens} tok; first {c.per_request[0]}, last {c.per_request[-1]})  {caching(c)}")
        else:
            print(f"  {agent.name:24} not measured: {failures[agent.name]}")
    if "crystal run" not in costs:
        raise RuntimeError(failures["crystal run"])
    ours = costs["crystal run"]
    others = {name: c for name, c in costs.items() if not name.startswith("crystal")}
    rows: list[dict[str, Any]] = []
    for unit, label, figure in (("tok", "input tokens", lambda c: c.tokens), ("B", "request bytes", lambda c: c.bytes)):
        if not others:
            rows.append(skipped_row(f"cost: {label}, 10-step task, crystal vs leanest", unit,
                                    "; ".join(failures.values()), None, {"ratio_max": TARGET}))
            continue
        lean = min(others, key=lambda n: figure(others[n]))
        rows.append(row(f"cost: {label}, 10-step task, crystal vs {lean} (leanest)", figure(ours),
                        figure(others[lean]), unit, {"ratio_max": TARGET},
                        note=f"crystal run on Chat Completions: {caching(ours)}" if unit == "tok" else None))
    for agent in AGENTS[2:]:
        name = f"cost: input tokens, 10-step task, crystal vs {agent.name}"
        if agent.name not in costs:
            rows.append(skipped_row(name, "tok", failures[agent.name]))
            continue
        c = costs[agent.name]
        rows.append(row(name, ours.tokens, c.tokens, "tok", note=f"{agent.name}: {c.bytes} B, {caching(c)}"))
    rows += billed_rows(costs, failures)
    name = "cost: input tokens, 10-step task, crystal on Anthropic vs Claude Code"
    ant = costs.get("crystal run (anthropic)")
    if ant is None or "Claude Code" not in costs:
        rows.append(skipped_row(name, "tok", failures.get("crystal run (anthropic)") or failures["Claude Code"]))
    else:
        rows.append(row(name, ant.tokens, costs["Claude Code"].tokens, "tok",
                        note=f"crystal run on Anthropic Messages: {ant.bytes} B, {caching(ant)}"))
    return rows


def bills(costs: dict[str, Cost]) -> dict[str, Bill]:
    """Each measured agent's requests, billed by its wire's prompt-cache rules."""
    encode = o200k_base().encode
    return {name: bill_of([entry["body"] for entry in cost.log], cost.wire, encode) for name, cost in costs.items()}


def billed_rows(costs: dict[str, Cost], failures: dict[str, str]) -> list[dict[str, Any]]:
    """Tokens as billed: the repeated prefix, the cache's share and the task's input cost
    against each anchor at its model's prices, then against the cheapest anchor."""
    billed = bills(costs)
    for name, bill in billed.items():
        print(f"  {name:24} repeats {bill.repeated_share():6.1%} of the previous request; cached {bill.cached:7} "
              f"written {bill.written:6} full {bill.total - bill.cached - bill.written:7} of {bill.total} tok")
    rows: list[dict[str, Any]] = []
    cheapest: tuple[float, str, float] | None = None
    for anchor, (model, ours_name) in ANCHOR_MODELS.items():
        price = PRICES[model]
        share = f"cost: share of each request repeating the previous one's prefix, crystal vs {anchor}"
        money = f"cost: billed input cost (prompt caches), 10-step task, crystal vs {anchor} at {model} prices"
        missing = failures.get(anchor) or failures.get(ours_name)
        if anchor not in billed or ours_name not in billed:
            rows += [skipped_row(share, "%", missing or "not measured"), skipped_row(money, "USD", missing or "")]
            continue
        ours, theirs = billed[ours_name], billed[anchor]
        rows.append(row(share, 100 * ours.repeated_share(), 100 * theirs.repeated_share(), "%",
                        note=f"{ours_name} against {anchor}, each on its own wire"))
        note = (f"{ours_name}: {ours.cached} of {ours.total} tok cached, {ours.written} written; {anchor}: "
                f"{theirs.cached} of {theirs.total} cached, {theirs.written} written")
        rows.append(row(money, ours.cost(price), theirs.cost(price), "USD", note=note))
        if cheapest is None or theirs.cost(price) < cheapest[0]:
            cheapest = (theirs.cost(price), anchor, ours.cost(price))
    name = "cost: billed input cost (prompt caches), 10-step task, crystal vs the cheapest anchor"
    if cheapest is None:
        rows.append(skipped_row(name, "USD", "; ".join(failures.values()) or "no anchor measured", None,
                                {"ratio_max": BILLED_TARGET}))
    else:
        theirs_cost, anchor, ours_cost = cheapest
        model = ANCHOR_MODELS[anchor][0]
        rows.append(row(name, ours_cost, theirs_cost, "USD", {"ratio_max": BILLED_TARGET},
                        note=f"{anchor} at {model} prices was the cheapest; crystal on the same provider and prices"))
    return rows


if __name__ == "__main__":
    for r in main():
        print(r["name"], r["ours"], r["reference"])
