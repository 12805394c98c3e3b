"""Several calls in one reply: the read-only ones the host allows without a
person run concurrently, results in call order; a call that writes or needs approval
runs alone, after the ones before it. Real tools on real files; ``read`` and ``grep``
are slowed to 200 ms each, as on a slow disk."""

from __future__ import annotations

import asyncio
import time

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import ToolCallStarted, ToolResultEvent
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply
from crystal_kernel.tools.grep import GrepTool
from crystal_kernel.tools.read import ReadTool
from crystal_kernel.tools.write import WriteTool

DELAY = 0.2


@pytest.fixture
def slow_tools(monkeypatch):
    """read, grep and write each take 200 ms more; the spans they ran in are recorded."""
    spans: dict[str, list[tuple[float, float]]] = {}

    def slowed(cls, name):
        original = cls.run

        async def run(self, args, ctx):
            start = time.monotonic()
            await asyncio.sleep(DELAY)
            result = await original(self, args, ctx)
            spans.setdefault(name, []).append((start, time.monotonic()))
            return result

        monkeypatch.setattr(cls, "run", run)

    for cls, name in ((ReadTool, "read"), (GrepTool, "grep"), (WriteTool, "write")):
        slowed(cls, name)
    return spans


def session_for(workspace, replies, approval="default") -> Session:
    config = load_config(overrides={"approval": approval})
    return Session(workspace=workspace, config=config, provider=ScriptedProvider(replies), person_present=False)


async def test_five_reads_and_greps_run_together_results_in_call_order(workspace, slow_tools):
    for n in range(3):
        (workspace / f"f{n}.txt").write_text(f"line {n}\nneedle {n}\n")
    calls = [("read", {"path": "f0.txt"}), ("grep", {"pattern": "needle"}), ("read", {"path": "f1.txt"}),
             ("grep", {"pattern": "line 2"}), ("read", {"path": "f2.txt"})]
    session = session_for(workspace, [tool_reply(calls), text_reply("done")])
    events = [e async for e in run_turn(session, "look")]
    reads, greps = slow_tools["read"], slow_tools["grep"]
    elapsed = max(end for _, end in reads + greps) - min(start for start, _ in reads + greps)
    assert elapsed < DELAY * 5 * 0.6, f"five 200 ms calls took {elapsed:.2f} s: they did not overlap"
    assert len(reads) == 3 and len(greps) == 2
    first_end = min(end for _, end in reads + greps)
    assert all(start < first_end for start, _ in reads + greps), "every call started before any finished"
    # The model gets the results in the order it made the calls.
    results = session.transcript[-2].tool_results() if session.transcript[-1].role == "assistant" else []
    started = [e.id for e in events if isinstance(e, ToolCallStarted)]
    assert [r.call_id for r in results] == started
    assert "line 0" in results[0].text and "needle 0" in results[1].text and "line 2" in results[3].text
    assert all(e.status == "ok" for e in events if isinstance(e, ToolResultEvent))


async def test_a_write_between_reads_keeps_its_place(workspace, slow_tools):
    (workspace / "a.txt").write_text("old\n")
    calls = [("read", {"path": "a.txt"}), ("read", {"path": "a.txt"}),
             ("write", {"path": "a.txt", "content": "new\n"}), ("read", {"path": "a.txt"})]
    session = session_for(workspace, [tool_reply(calls), text_reply("done")], approval="edit")
    [e async for e in run_turn(session, "change it")]
    (r1, r2), (write,), (r3,) = slow_tools["read"][:2], slow_tools["write"], slow_tools["read"][2:]
    assert r1[0] < r2[1] and r2[0] < r1[1]  # the two reads before it overlapped
    assert write[0] >= max(r1[1], r2[1]) and r3[0] >= write[1]  # the write ran alone, in order
    results = session.transcript[-2].tool_results()
    assert "old" in results[0].text and "new" in results[3].text


async def test_calls_that_would_ask_run_one_at_a_time(workspace, slow_tools):
    calls = [("write", {"path": "x.txt", "content": "1"}), ("write", {"path": "y.txt", "content": "2"})]
    session = session_for(workspace, [tool_reply(calls), text_reply("done")], approval="default")
    events = [e async for e in run_turn(session, "write two")]
    # No person: both asked and were denied, one after the other, in order.
    statuses = [(e.name, e.status) for e in events if isinstance(e, ToolResultEvent)]
    assert statuses == [("write", "denied"), ("write", "denied")]
    assert not (workspace / "x.txt").exists()


async def test_every_call_ends_in_a_result_event_also_when_cancelled(workspace):
    """SPEC §12 tool_result status: the running call and the one after it both end in
    a ToolResultEvent with status cancelled; the transcript pairs each call."""
    calls = [("bash", {"command": "sleep 30"}), ("bash", {"command": "echo never"})]
    session = session_for(workspace, [tool_reply(calls)], approval="full")
    turn = run_turn(session, "run two")
    events = []

    async def consume():
        async for event in turn:
            events.append(event)
            if isinstance(event, ToolCallStarted):
                await asyncio.sleep(0.3)
                turn.cancel()

    await asyncio.wait_for(consume(), 30)
    results = [(e.name, e.status, e.ok) for e in events if isinstance(e, ToolResultEvent)]
    assert results == [("bash", "cancelled", False), ("bash", "cancelled", False)]
    assert events[-1].stop_reason == "cancelled"
    answered = session.transcript[-1].tool_results()
    assert [r.text for r in answered] == ["Cancelled by the person.", "Cancelled before it ran."]


async def test_a_call_that_waits_for_a_job_runs_before_the_log_read_after_it(workspace):
    """A model that waits for its background job and reads the job's log in one reply
    reads the log of the ended job: the waiting ``bash_status`` is not run beside the
    ``bash_logs`` after it (both are plain reads), or the read finds the job mid-run
    with no output (as the demo's tour did in CI)."""
    start = [("bash_start", {"command": "sleep 0.5; echo the-job-is-finished"})]
    wait_then_read = [("bash_status", {"job_id": "j1", "wait_seconds": 30}), ("bash_logs", {"job_id": "j1"})]
    session = session_for(workspace, [tool_reply(start), text_reply("started"),
                                      tool_reply(wait_then_read), text_reply("done")], approval="full")
    try:
        [e async for e in run_turn(session, "start the job")]
        [e async for e in run_turn(session, "wait for it and read its log")]
        results = session.transcript[-2].tool_results()
        assert [r.call_id for r in results] and len(results) == 2
        status, logs = results
        assert "exited" in status.text, status.text
        assert "the-job-is-finished" in logs.text, logs.text
    finally:
        await session.close()
