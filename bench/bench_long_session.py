"""A long session: 300 turns with tool calls, then resume.

A child process (so that nothing else this run imported counts) runs 300 turns on one
session against the loopback server; each turn the model reads an 8 KB file (so every
turn adds an 8 KB tool result), every 10th turn it also rewrites the todo list, then it
answers. The session is saved after every turn (its journal appended), as in every
front.

Figures:
- the last 30 turns' mean time against the first 30 (does a turn get slower as the
  session grows?). Target ratio <= 1.2. It cannot be met while every request
  carries the whole transcript: by turn 300 the request body is ~2.7 MB, and sending it
  and the loopback server parsing it grow with the session. The server runs in a
  process of its own, as a model server does for a real host (:class:`_ServerProcess`).
- the host's own time per turn, last 30 against first 30: the turn minus its HTTP
  exchanges (opening the stream and each event of the reply), so building and encoding
  the requests, compaction checks, tools, events and the save. Target ratio <= 1.2.
  The body's kept pieces are written out while it is sent (providers/wire_cache.py
  ``Body``), inside the exchange; so the next figure:
- the host process's CPU per turn, last 30 against first 30: everything the host does
  in a turn, sending included (the server is another process). No target.
- the save alone, last 30 turns against the first 30: what the journal changed (each
  turn appends its own lines and fsyncs). Target ratio <= 1.2.
- resume time: a fresh Session in the same workspace resuming the 300-turn session
  (read + parse + rebuild the transcript), median of 5; reference: ``json.loads`` of
  the same bytes. Target under 0.5 s.
- resume of a 50 MB session, as a session in use gets there: a new session grown by
  turns of 8 KB tool results to 50 MB, with the loop's automatic compaction (a real
  compaction request to the loopback server) whenever the next request reaches the
  threshold of the model's window, saved every 100 turns; median of 3; reference:
  ``json.loads`` of each line of the same file. Target under 0.5 s. Resume parses the
  transcript the next request sends; the history-only lines stay unread until something
  reads the history (core/message_log.py).
- resume of a 50 MB session never compacted: the 300-turn session grown to 50 MB
  without compaction (its whole transcript goes into the next request, which no model's
  window takes), same reference and target: what resume costs when every line is needed.
- memory growth: RSS after turn 300 minus RSS after turn 30 (the first turns load
  lazily imported modules). Target flat within 50 MB.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._support import row

TURNS = int(os.environ.get("BENCH_LONG_TURNS", "300"))
MEGABYTES = int(os.environ.get("BENCH_LONG_MB", "50"))
EARLY = 30


def _router(body: dict[str, Any], path: str) -> dict[str, Any]:
    messages = body.get("messages", [])
    if not body.get("tools"):  # a compaction request (a side call offers no tools)
        return {"text": "## Goal\nRead notes.txt on every turn.\n\n## Next steps\nKeep reading it."}
    if messages and messages[-1].get("role") == "tool":
        return {"text": "Read it; all good.", "chunk": 64}
    turn = sum(1 for m in messages if m.get("role") == "user")
    calls = [{"name": "read", "arguments": {"path": "notes.txt"}}]
    if turn % 10 == 0:
        calls.append({"name": "todowrite", "arguments": {"todos": [
            {"content": f"step {turn}", "status": "in_progress"}, {"content": "next", "status": "pending"}]}})
    return {"tool_calls": calls, "arg_chunk": 64}


async def _child(workspace: Path, out: Path) -> None:
    import psutil

    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.loop import run_turn
    from crystal_kernel.host.session import Session
    from crystal_kernel.providers.registry import make_provider
    # 8 KB: a typical tool output (the read tool numbers the lines, a little more).
    (workspace / "notes.txt").write_text("".join(f"line {i:03}: some notes about the project, padded..\n"
                                                 for i in range(150)))
    me = psutil.Process()
    with _ServerProcess() as server:
        config = load_config(home=workspace / "home", environ={}, overrides={
            "provider": "openai", "baseUrl": server.base_url, "model": "gpt-4.1", "apiKeyEnv": "BENCH_KEY",
            "approval": "full", "topicNaming": False})
        session = Session(workspace=workspace, config=config, provider=make_provider(config, workspace=workspace),
                          person_present=False)
        times: list[float] = []
        rss: dict[int, float] = {}
        # The save alone (what the journal changed): timed around each turn's save.
        saves: list[float] = []
        original_save = session.save

        def timed_save() -> Path:
            start = time.perf_counter()
            try:
                return original_save()
            finally:
                saves.append(time.perf_counter() - start)

        session.save = timed_save  # type: ignore[method-assign]
        # The HTTP exchange (posting the encoded body, the loopback server parsing it,
        # its reply until the last event): the host's own time is the turn minus this.
        exchange = [0.0]
        _time_exchanges(session.provider, exchange)
        own: list[float] = []
        # The host process's CPU per turn, sending included (the server is another process).
        cpu: list[float] = []
        for turn in range(1, TURNS + 1):
            exchange[0] = 0.0
            start = time.perf_counter()
            cpu_start = time.process_time()
            async for event in run_turn(session, f"Turn {turn}: read notes.txt"):
                if type(event).__name__ == "ErrorEvent":
                    raise RuntimeError(f"turn {turn}: {event.message}")
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
            own.append(times[-1] - exchange[0])
            if turn in (EARLY, TURNS):
                rss[turn] = me.memory_info().rss / 2**20
        await session.close()
        session.save = original_save  # type: ignore[method-assign]
        turn_saves = saves[:TURNS]
        path = session.store.path_for(session.id)
        resume, parse = _resume_times(session, config, 5)
        size_mb = path.stat().st_size / 2**20
        messages = len(session.transcript)
        big_resume, big_parse, big_mb = _grow_and_resume(session, config, MEGABYTES)
        compacted = await _grow_compacted(workspace, config, MEGABYTES)
    report = json.dumps({
        "resume": resume, "parse": parse,
        "rss_early": rss[EARLY], "rss_end": rss[TURNS], "size_mb": size_mb,
        "first": statistics.mean(times[:EARLY]), "last": statistics.mean(times[-EARLY:]),
        "messages": messages, "big_resume": big_resume, "big_parse": big_parse, "big_mb": big_mb,
        **compacted,
        "save_first": statistics.mean(turn_saves[:EARLY]), "save_last": statistics.mean(turn_saves[-EARLY:]),
        "own_first": statistics.mean(own[:EARLY]), "own_last": statistics.mean(own[-EARLY:]),
        "cpu_first": statistics.mean(cpu[:EARLY]), "cpu_last": statistics.mean(cpu[-EARLY:])})
    await asyncio.to_thread(out.write_text, report)


class _ServerProcess:
    """The loopback server in a process of its own (``python -m
    crystal_kernel.testing.llm_server`` with this module's router), as a model server
    is for a real host: in the host's process its parse of each ~2.7 MB body made
    thousands of objects that outlived two young collections, so the host's full
    garbage collections came more often and cost more as the session grew, which the
    host's own time paid (docs/benchmarks.md: 1,006 collections, 7 of them full, instead of 268 and
    2 over the 300 turns)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crystal_kernel.testing.llm_server", "--router", "bench.bench_long_session:_router",
             "--log-limit", "10", "--lifetime", "1800"],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.process.kill()
            raise RuntimeError(f"the loopback server did not start: {self.url!r}")
        self.base_url = self.url + "/v1"

    def __enter__(self) -> _ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait()


def _time_exchanges(provider: Any, total: list[float]) -> None:
    """Add to ``total[0]`` the time spent awaiting the provider's HTTP exchange: opening
    the stream (the SDK sending the body, the server reading and parsing it, the reply's
    headers) and each event of the reply. Building and encoding the body stay outside."""
    open_stream = provider.open_stream

    class Timed:
        def __init__(self, events: Any) -> None:
            self.events = events

        def __aiter__(self) -> Any:
            return self.iterate()

        async def iterate(self) -> Any:
            iterator = self.events.__aiter__()
            while True:
                start = time.perf_counter()
                try:
                    item = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    total[0] += time.perf_counter() - start
                yield item

        async def close(self) -> None:
            await self.events.close()

    async def timed(body: Any) -> Any:
        start = time.perf_counter()
        try:
            return Timed(await open_stream(body))
        finally:
            total[0] += time.perf_counter() - start

    provider.open_stream = timed


def _resume_times(session: Any, config: Any, runs: int) -> tuple[float, float]:
    """Median resume time of ``session`` into a fresh Session, and of parsing its file."""
    from crystal_kernel.host.session import Session

    path = session.store.path_for(session.id)
    resume: list[float] = []
    parse: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        fresh = Session(workspace=session.workspace, config=config, provider=session.provider, person_present=False)
        fresh.resume(session.id)
        resume.append(time.perf_counter() - start)
        assert fresh.turns == session.turns and len(fresh.history) == len(session.history)
        # Freed here, not when the next run rebinds the name inside its timing: dropping a
        # resumed 50 MiB session (~250,000 objects) is no part of the next resume.
        del fresh
        start = time.perf_counter()
        for line in path.read_bytes().splitlines():
            json.loads(line)
        parse.append(time.perf_counter() - start)
    return statistics.median(resume), statistics.median(parse)


def _grow(session: Any, start: int, turns: int) -> int:
    """Append ``turns`` turns of an 8 KB tool result each to both lists (what run_turn adds)."""
    from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart

    text = (session.workspace / "notes.txt").read_text()
    n = start
    for _ in range(turns):
        n += 1
        call = Message(role="assistant", parts=[ToolCallPart(id=f"g{n}", name="read",
                                                             arguments={"path": "notes.txt"})])
        result = Message(role="user", parts=[ToolResultPart(call_id=f"g{n}", name="read", ok=True, text=text)])
        answer = Message(role="assistant", parts=[TextPart(text=f"Read it ({n}).")])
        for message in (Message.user_text(f"grow {n}"), call, result, answer):
            session.transcript.append(message)
            session.history.append(message)
    return n


def _grow_and_resume(session: Any, config: Any, megabytes: int) -> tuple[float, float, float]:
    """Grow ``session`` to ``megabytes`` with 8 KB tool results, never compacted (its
    transcript is the whole 50 MB: every message goes into the next request), then time
    its resume."""
    path = session.store.path_for(session.id)
    n = 0
    while path.stat().st_size < megabytes * 2**20:
        n = _grow(session, n, 100)
        session.save()
    resume, parse = _resume_times(session, config, 3)
    return resume, parse, path.stat().st_size / 2**20


async def _grow_compacted(workspace: Path, config: Any, megabytes: int) -> dict[str, float]:
    """A new session grown to ``megabytes`` the way a long session grows in use: turns
    of 8 KB tool results, compacted by the loop's own automatic compaction (a real
    compaction request to the loopback server) whenever the next request reaches the
    threshold of the model's context window, saved after every 100 turns. Then resume,
    against json.loads of the same file."""
    from crystal_kernel.host.compaction import auto_compact, context_window
    from crystal_kernel.host.session import Session
    from crystal_kernel.providers.registry import make_provider

    session = Session(workspace=workspace, config=config, provider=make_provider(config, workspace=workspace),
                      person_present=False)
    await session.prepare_tools()  # build_request() needs the catalog (run_turn builds it itself)
    path = session.store.journal_path(session.id)
    n = compactions = 0
    # A session with nothing in it writes no file (SPEC §13 "Session files"): grow first.
    while not path.exists() or path.stat().st_size < megabytes * 2**20:
        n = _grow(session, n, 100)
        if await auto_compact(session, session.build_request()):
            compactions += 1
        session.save()
    window = context_window(session)
    await session.close()
    resume, parse = _resume_times(session, config, 3)
    return {"compacted_resume": resume, "compacted_parse": parse, "compacted_mb": path.stat().st_size / 2**20,
            "compactions": compactions, "compacted_transcript": len(session.transcript),
            "compacted_history": len(session.history), "window": window}


def main() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-long-") as name:
        tmp = Path(name)
        out = tmp / "result.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env["BENCH_KEY"] = "bench-key"
        done = subprocess.run([sys.executable, "-m", "bench.bench_long_session", str(tmp), str(out)],
                              cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"the long session failed: {done.stderr.strip()[-400:]}")
        r = json.loads(out.read_text())
    print(f"  {TURNS} turns, {r['messages']} messages, journal {r['size_mb']:.2f} MiB; "
          f"turn time first {EARLY} {r['first'] * 1000:.1f} ms, last {EARLY} {r['last'] * 1000:.1f} ms; "
          f"grown to {r['big_mb']:.1f} MiB: resume {r['big_resume']:.3f} s")
    return [
        row(f"long session: mean turn time, last {EARLY} vs first {EARLY} (8 KB results)", r["last"] * 1000,
            r["first"] * 1000, "ms", {"ratio_max": 1.2},
            note="every request carries the whole transcript (~2.7 MB by turn 300): sending it and the loopback "
                 "server (a process of its own, on the same cores) parsing it grow with the session; the next row "
                 "is the host's own time, which the transcript's kept wire form keeps flat"),
        row(f"long session: the host's own time per turn, last {EARLY} vs first {EARLY} (8 KB results)",
            r["own_last"] * 1000, r["own_first"] * 1000, "ms", {"ratio_max": 1.2},
            note="the turn minus its HTTP exchanges (the SDK sending the body, the loopback server parsing it, "
                 "the reply): building and encoding the requests, tools, compaction checks, events and the save "
                 "(its fsync's latency varies on this shared disk: the save row); the body's kept pieces are "
                 "written out as they are sent (wire_cache.Body), inside the exchange: the next row counts both"),
        row(f"long session: the host process's CPU per turn, last {EARLY} vs first {EARLY} (8 KB results)",
            r["cpu_last"] * 1000, r["cpu_first"] * 1000, "ms", None,
            note="all the host's work of a turn, sending the ~2.7 MB bodies and reading the replies included "
                 "(process CPU time; the loopback server is a process of its own): no target, it shows that the "
                 "row above is not work moved into the exchange"),
        row(f"long session: session save, last {EARLY} vs first {EARLY} turns", r["save_last"] * 1000,
            r["save_first"] * 1000, "ms", {"ratio_max": 1.2},
            note=None if r["save_last"] <= 1.2 * r["save_first"] else
            "each save appends its lines and fsyncs once, whatever the session's size; what varies is the "
            "fsync's latency on this shared disk"),
        row(f"long session: resume after {TURNS} turns vs json.loads", r["resume"], r["parse"], "s",
            {"ours_max": 0.5}),
        row(f"long session: resume of a {r['compacted_mb']:.0f} MiB session (compacted as the window "
            "requires) vs json.loads", r["compacted_resume"], r["compacted_parse"], "s", {"ours_max": 0.5},
            note=f"{r['compactions']} automatic compactions ({r['window']:,}-token window); resume parsed the "
                 f"{r['compacted_transcript']} transcript messages the next request sends and left the other "
                 f"{r['compacted_history'] - r['compacted_transcript']} history lines unread"
                 + ("" if r["compacted_resume"] <= 0.5 else
                    f"; json.loads of the same file takes {r['compacted_parse']:.2f} s here")),
        row(f"long session: resume of a {r['big_mb']:.0f} MiB session never compacted vs json.loads",
            r["big_resume"], r["big_parse"], "s", {"ours_max": 0.5},
            note=None if r["big_resume"] <= 0.5 else
            f"its transcript is all {r['big_mb']:.0f} MiB (about {r['big_mb'] * 2**20 / 4 / 1e6:.0f}M tokens, more "
            "than any model's window; automatic compaction keeps a session in use from getting there): the next "
            "request sends every message, so resume parses and validates every line (pydantic's JSON parser, "
            "about json.loads' own speed, with the garbage collector paused); json.loads alone of the "
            f"same file takes {r['big_parse']:.2f} s here"),
        row(f"long session: RSS growth, turn {EARLY} -> {TURNS}", r["rss_end"] - r["rss_early"], None, "MiB",
            {"ours_max": 50}),
    ]


if __name__ == "__main__":
    asyncio.run(_child(Path(sys.argv[1]), Path(sys.argv[2])))
