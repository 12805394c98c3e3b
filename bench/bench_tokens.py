"""Token footprint: the Work system text plus every tool schema, as actually sent.

The figures come from real request bodies: ``crystal run`` (headless, an empty git
repository, Work mode) and an in-process notebook session (the kernel's catalog: the
question tool and the python/variables/cell_output notebook tools added) each send one
Chat Completions request to the loopback model server, and the body the server
received is counted with tiktoken's ``o200k_base``.

Offline: tiktoken downloads its encoding file at first use. The npm package
``tiktoken`` (installed in build/agents, see bench/_support.py) ships the same
``o200k_base`` ranks in ``encoders/o200k_base.json`` (``pat_str``, ``special_tokens`` and
``bpe_ranks`` as one line ``"! 0 <base64 token> <base64 token> ..."``, ranks counting up
from 0); :func:`o200k_base` builds a ``tiktoken.Encoding`` from that file, so no
network is needed. A known encoding is checked before counting.

Reference (measured the same way on a first request in an empty
repository): opencode 1.18 about 6,250-6,550, Codex CLI 0.171 about 7,950-12,550,
Claude Code 2.1 about 11,000-12,200. Target: under 5,000 tokens.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench._support import CRYSTAL, crystal_env, npm_folder, row, skipped_row
from crystal_kernel.testing.llm_server import LLMServer

TARGET = 5000
REFERENCE_LOW = 6250  # opencode 1.18, the leanest of the three references
_ENCODING: Any = None


def o200k_base() -> Any:
    """tiktoken's o200k_base built from the npm ``tiktoken`` package's file (offline)."""
    global _ENCODING
    if _ENCODING is not None:
        return _ENCODING
    import tiktoken

    folder, reason = npm_folder()
    if folder is None:
        raise RuntimeError(f"o200k_base is not available offline: {reason}")
    data = json.loads((folder / "node_modules" / "tiktoken" / "encoders" / "o200k_base.json").read_text())
    head, _, rest = data["bpe_ranks"].partition(" ")
    start, _, tokens = rest.partition(" ")
    if head != "!" or "\n" in tokens:
        raise RuntimeError("unexpected layout of tiktoken's o200k_base.json")
    ranks = {base64.b64decode(tok): int(start) + i for i, tok in enumerate(tokens.split(" "))}
    encoding = tiktoken.Encoding(name="o200k_base", pat_str=data["pat_str"], mergeable_ranks=ranks,
                                 special_tokens=data["special_tokens"])
    # Known o200k_base ids (tiktoken's own tests): a wrong load would not give these.
    if encoding.encode("hello world") != [24912, 2375]:
        raise RuntimeError("o200k_base loaded from npm does not encode 'hello world' as [24912, 2375]")
    _ENCODING = encoding
    return encoding


def count(text: str) -> int:
    return len(o200k_base().encode(text, disallowed_special=()))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def headless_body(tmp: Path) -> dict[str, Any]:
    """The first request body of ``crystal run`` in an empty git repository."""
    workspace = tmp / "repo"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    with LLMServer([{"text": "ok"}]) as server:
        done = subprocess.run([str(CRYSTAL), "run", "say ok", "--workspace", str(workspace)],
                              env=crystal_env(tmp / "home", server.base_url), capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"crystal run failed: {done.stderr.strip()[-300:]}")
        return server.bodies("chat")[0]


async def _notebook_body(tmp: Path) -> dict[str, Any]:
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.events import ErrorEvent
    from crystal_kernel.host.loop import run_turn
    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter import notebook_plugin
    from crystal_kernel.providers.registry import make_provider

    # The notebook tools (python, variables, cell_output) are the jupyter front's own: the
    # kernel registers them at start (jupyter/kernel.py), and so must this stand-in for it.
    notebook_plugin.register()

    workspace = tmp / "nb"
    workspace.mkdir()
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q"], cwd=workspace, check=True)
    with LLMServer([{"text": "ok"}]) as server:
        config = load_config(home=tmp / "home" / ".crystal",
                             overrides={"provider": "openai", "baseUrl": server.base_url, "model": "gpt-4.1",
                                        "apiKeyEnv": "BENCH_KEY", "topicNaming": False}, environ={})
        import os

        os.environ.setdefault("BENCH_KEY", "bench-key")
        session = Session(workspace=workspace, config=config, provider=make_provider(config, workspace=workspace),
                          person_present=True, notebook=True)
        errors = [event.message async for event in run_turn(session, "say ok") if isinstance(event, ErrorEvent)]
        await session.close()
        bodies = server.bodies("chat")
        if not bodies:
            raise RuntimeError(f"the notebook session sent no chat request: {'; '.join(errors) or 'no error event'}")
        return bodies[0]


def breakdown(body: dict[str, Any]) -> dict[str, Any]:
    system = next(m["content"] for m in body["messages"] if m["role"] in ("system", "developer"))
    if isinstance(system, list):
        system = "".join(p.get("text", "") for p in system)
    tools = []
    for tool in body.get("tools", []):
        fn = tool["function"]
        tools.append({"name": fn["name"], "total": count(compact(tool)),
                      "description": count(fn.get("description", "")),
                      "schema": count(compact(fn.get("parameters", {})))})
    return {"system": count(system), "tools": tools, "tools_total": sum(t["total"] for t in tools)}


def report(label: str, parts: dict[str, Any]) -> None:
    total = parts["system"] + parts["tools_total"]
    print(f"  {label}: system {parts['system']} + tools {parts['tools_total']} = {total} tokens (o200k_base)")
    for t in sorted(parts["tools"], key=lambda t: -t["total"]):
        print(f"    {t['name']:14} {t['total']:5}  (description {t['description']}, schema {t['schema']})")


def main() -> list[dict[str, Any]]:
    try:
        o200k_base()
    except Exception as exc:
        reason = f"no offline o200k_base: {exc}"
        return [skipped_row("tokens: Work system + tool schemas (crystal run)", "tok", reason, REFERENCE_LOW,
                            {"ours_max": TARGET})]
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as name:
        tmp = Path(name)
        headless = breakdown(headless_body(tmp))
        notebook = breakdown(asyncio.run(_notebook_body(tmp)))
    report("crystal run (headless, Work)", headless)
    report("notebook kernel (Work, question + notebook tools)", notebook)
    rows: list[dict[str, Any]] = []
    for label, parts in (("crystal run", headless), ("notebook", notebook)):
        total = parts["system"] + parts["tools_total"]
        rows.append(row(f"tokens: Work system + tool schemas ({label})", total, REFERENCE_LOW, "tok",
                        {"ours_max": TARGET}, note="reference: opencode 1.18 low end"
                        if label == "crystal run" else None))
        rows.append(row(f"tokens: Work system text ({label})", parts["system"], None, "tok"))
        rows.append(row(f"tokens: {len(parts['tools'])} tool schemas ({label})", parts["tools_total"], None, "tok"))
    heaviest = sorted(headless["tools"], key=lambda t: -t["total"])[:5]
    rows[0]["parts"] = {"system": headless["system"], "tools": headless["tools"]}
    rows[0]["heaviest"] = [t["name"] for t in heaviest]
    rows[3]["parts"] = {"system": notebook["system"], "tools": notebook["tools"]}
    return rows


if __name__ == "__main__":
    for r in main():
        print(r["name"], r["ours"])
