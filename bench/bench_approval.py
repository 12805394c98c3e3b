"""Per-step host costs of approval, review and usage, against what sending the request
costs every model step.

Rows, each measured warm in the same run as its reference: the request body's bytes as
the OpenAI adapter writes them for the wire (``session.build_request()``, then the
adapter's ``body`` and ``payload``, and the chunks the transport writes from it: the
work every model step pays to put its bytes out). Before, the reference was ``session.build_request()`` alone, which now only hands
back kept objects (~1.4 µs) and is not the same kind of work as a decision or a token
estimate (docs/benchmarks.md):

- the compaction check: ``estimate_tokens`` of a request with 40 transcript messages
  and the full Work catalog (target: at most 0.2x the reference);
- one approval decision for a read call with 10 forbidden rules (forbidden matching,
  the mode table, the audit entry and the event) (target: at most 0.5x), timed inside
  one running event loop (a ``run_until_complete`` per decision timed the loop's own
  start and stop, ~20 µs, with it).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

RUNS = 300


def _median_ms(fn, runs: int = RUNS) -> float:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _row(name: str, ours: float, ref: float, ratio_max: float) -> dict:
    ratio = ours / ref if ref else None
    row = {"name": name, "ours": ours, "reference": ref, "unit": "ms", "ratio": ratio,
           "target": {"ratio_max": ratio_max}}
    row["met"] = ratio is not None and ratio <= ratio_max
    print(f"{name}: {ours:.4f} ms (request body for the wire {ref:.4f} ms, ratio {ratio:.2f}x, target <= {ratio_max}x)")
    return row


def main() -> list[dict]:
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.interaction import NoPerson
    from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
    from crystal_kernel.host.approval_flow import decide
    from crystal_kernel.host.compaction import estimate_tokens
    from crystal_kernel.host.session import Session
    from crystal_kernel.providers.openai_chat import OpenAIChatProvider
    from crystal_kernel.testing.scripted import ScriptedProvider
    from crystal_kernel.tools.base import Classification, Risk

    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        ws.mkdir()
        session = Session(workspace=ws, config=load_config(home), provider=ScriptedProvider(model="m"))
        for n in range(10):
            call = ToolCallPart(id=f"c{n}", name="read", arguments={"path": f"f{n}.py"})
            session.transcript += [
                Message.user_text(f"request {n}"),
                Message(role="assistant", parts=[call]),
                Message(role="user", parts=[ToolResultPart(call_id=f"c{n}", name="read", ok=True, text="x" * 4000)]),
                Message(role="assistant", parts=[TextPart(text="done " * 50)]),
            ]
        session.config.forbidden = [{"tool": "bash", "pattern": f"rm -rf {n}*"} for n in range(5)] + \
            [{"tool": "write", "pattern": f"**/secret{n}/**"} for n in range(5)]
        loop = asyncio.new_event_loop()
        loop.run_until_complete(session.prepare_tools())  # build_request needs the catalog
        request = session.build_request()
        adapter = OpenAIChatProvider("gpt-4.1", api_key="bench", base_url="http://127.0.0.1:9/v1")

        def wire_body() -> None:
            for _chunk in adapter.payload(adapter.body(session.build_request())).chunks():
                pass  # the bytes the transport writes (wire_cache.Body: pieces gathered into chunks)

        reference = _median_ms(wire_body)
        rows = [_row("compaction check (estimate_tokens, 40 messages)", _median_ms(lambda: estimate_tokens(request)),
                     reference, 0.2)]

        person = NoPerson()
        read = Classification(Risk.READ, pattern="src/app.py")
        call = ToolCallPart(id="r", name="read", arguments={"path": "src/app.py"})

        async def decisions() -> float:
            for _ in range(20):
                await decide(session, person, call, read, lambda e: None)
                session.audit.clear()
            samples = []
            for _ in range(RUNS):
                start = time.perf_counter()
                await decide(session, person, call, read, lambda e: None)
                samples.append((time.perf_counter() - start) * 1000)
                session.audit.clear()
            return statistics.median(samples)

        rows.append(_row("approval decision (read, 10 forbidden rules)", loop.run_until_complete(decisions()),
                         reference, 0.5))
        loop.close()
    return rows


if __name__ == "__main__":
    main()
