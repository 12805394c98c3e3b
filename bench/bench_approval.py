"""Per-step host costs of approval, review and usage, against building the request itself.

Rows, each measured warm in the same run as its reference, ``session.build_request()``
(which every model step already pays):

- the compaction check: ``estimate_tokens`` of a request with 40 transcript messages
  and the full Work catalog (target: at most 0.2x the reference);
- one approval decision for a read call with 10 forbidden rules (forbidden matching,
  the mode table, the audit entry and the event) (target: at most 0.5x).
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
    print(f"{name}: {ours:.4f} ms (build_request {ref:.4f} ms, ratio {ratio:.2f}x, target <= {ratio_max}x)")
    return row


def main() -> list[dict]:
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.interaction import NoPerson
    from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
    from crystal_kernel.host.approval_flow import decide
    from crystal_kernel.host.compaction import estimate_tokens
    from crystal_kernel.host.session import Session
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
        request = session.build_request()
        reference = _median_ms(session.build_request)
        rows = [_row("compaction check (estimate_tokens, 40 messages)", _median_ms(lambda: estimate_tokens(request)),
                     reference, 0.2)]

        loop = asyncio.new_event_loop()
        person = NoPerson()
        read = Classification(Risk.READ, pattern="src/app.py")
        call = ToolCallPart(id="r", name="read", arguments={"path": "src/app.py"})

        def one_decision() -> None:
            loop.run_until_complete(decide(session, person, call, read, lambda e: None))
            session.audit.clear()

        rows.append(_row("approval decision (read, 10 forbidden rules)", _median_ms(one_decision), reference, 0.5))
        loop.close()
    return rows


if __name__ == "__main__":
    main()
