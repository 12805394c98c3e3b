"""A crash mid-write loses at most the line being written (sessions as
journals): a child process runs turns with large prompts on one session and is killed
with SIGKILL at random moments; every complete line of the journal must come back on
resume, in order, and every turn the child reported as saved must be there."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from crystal_kernel.core.config import load_config
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import ScriptedProvider

ROUNDS = 6
CHILD = r"""
import asyncio, random, sys
from pathlib import Path
from crystal_kernel.core.config import load_config
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply

async def main(workspace, session_id, start, seed):
    rng = random.Random(seed)
    config = load_config(overrides={"approval": "full", "topicNaming": False})
    provider = ScriptedProvider([text_reply(f"answer {n}") for n in range(start, start + 400)])
    session = Session(workspace=Path(workspace), config=config, provider=provider, person_present=False,
                      session_id=session_id)
    if session.store.exists(session_id):
        session.resume(session_id)
    session.config.context_window = 10**9  # no compaction: this test is about appends
    for n in range(start, start + 400):
        # Large, varied prompts: a write takes long enough for a kill to land inside it.
        prompt = f"turn {n} " + "x" * rng.randrange(10_000, 1_500_000)
        async for event in run_turn(session, prompt):
            pass
        print(f"saved {n}", flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def complete_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def resumed(workspace: Path, session_id: str) -> Session:
    config = load_config(overrides={"approval": "full", "topicNaming": False})
    session = Session(workspace=workspace, config=config, provider=ScriptedProvider([]), person_present=False)
    session.resume(session_id)
    return session


def turn_number(message) -> int:
    return int(message.text().split()[1])


def test_sigkill_at_random_points_loses_at_most_the_line_being_written(workspace):
    rng = random.Random(int(os.environ.get("CRYSTAL_CRASH_SEED", time.time())))
    session_id = "crash-test"
    path = SessionStore(workspace).journal_path(session_id)
    acknowledged: list[int] = []
    next_turn, torn_seen = 1, 0
    for round_ in range(ROUNDS):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(workspace), session_id, str(next_turn),
                                  str(rng.randrange(1 << 30))], stdout=subprocess.PIPE, text=True)
        saved: list[int] = []
        reader = threading.Thread(target=lambda saved=saved, child=child: saved.extend(
            int(line.split()[1]) for line in child.stdout))
        reader.start()
        deadline = time.monotonic() + 60
        while not saved and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # start-up takes a while on a loaded machine: wait for one save
        assert saved, "the writer child never saved a turn"
        time.sleep(rng.uniform(0.0, 1.0))  # then a random number of turns, and a random point in one
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        reader.join(10)
        acknowledged += saved
        if not path.exists():
            continue  # killed before its first save
        data = path.read_bytes()
        torn_seen += not data.endswith(b"\n")
        lines = complete_lines(path)
        session = resumed(workspace, session_id)
        # Every complete message line came back, in order; nothing else did.
        written = [line["m"]["parts"][0]["text"] for line in lines if line["t"] == "msg" and line["to"] != "transcript"]
        assert [m.parts[0].text for m in session.history] == written
        # Every turn the child reported as saved is there, in order, each with its answer.
        users = [turn_number(m) for m in session.history if m.role == "user"]
        assert users[: len(acknowledged)] == acknowledged, (round_, users, acknowledged)
        assert len(users) <= len(acknowledged) + 1  # at most the turn being saved when killed
        answers = [m.text() for m in session.history if m.role == "assistant"]
        assert answers[: len(acknowledged)] == [f"answer {n}" for n in acknowledged]
        session.release_lock()  # the next writer resumes it (ROBUST-2: one front at a time)
        next_turn = (users[-1] if users else 0) + 1
        acknowledged = users  # a turn written but not yet reported is kept from now on
    assert acknowledged, "no turn was ever saved: the child did not run"
    # After the last kill, a normal save still appends cleanly to what was left.
    final = resumed(workspace, session_id)
    final.config.context_window = 10**9
    before = len(final.history)
    import asyncio

    from crystal_kernel.host.loop import run_turn
    from crystal_kernel.testing.scripted import text_reply

    final.provider.add(text_reply("after the crash"))

    async def one() -> None:
        async for _ in run_turn(final, "turn 0 after"):
            pass

    asyncio.run(one())
    assert path.read_bytes().endswith(b"\n")
    assert len(resumed(workspace, session_id).history) == before + 2
    print(f"rounds: {ROUNDS}, turns kept: {len(acknowledged)}, torn last lines seen: {torn_seen}")
