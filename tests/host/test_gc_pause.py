"""Resume builds its messages with the collector paused and leaves them in its oldest
generation (core/gc_pause.py): no young collection goes over what it just built (scale
target: resume of a 50 MB session < 0.5 s), and objects someone else froze stay frozen."""

from __future__ import annotations

import gc

from crystal_kernel.core.config import load_config
from crystal_kernel.core.gc_pause import paused_gc
from crystal_kernel.core.messages import Message, TextPart
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider


def make_session(workspace):
    config = load_config(overrides={"approval": "full", "topicNaming": False})
    return Session(workspace=workspace, config=config, provider=ScriptedProvider([]), person_present=False)


def in_generation(objects: list[object], generation: int) -> bool:
    held = {id(o) for o in gc.get_objects(generation=generation)}
    return all(id(o) in held for o in objects)


def test_resumed_messages_are_in_the_oldest_generation_and_the_collector_is_on(workspace):
    session = make_session(workspace)
    for n in range(200):
        message = Message(role="user" if n % 2 == 0 else "assistant", parts=[TextPart(text=f"m{n}")])
        session.transcript.append(message)
        session.history.append(message)
    session.save()
    session.release_lock()
    gc.unfreeze()  # what an in-process `crystal run` test may have left frozen (cli.cmd_run)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    resumed = make_session(workspace)
    resumed.resume(session.id)
    built = [*resumed.transcript, *(part for m in resumed.transcript for part in m.parts)]
    assert len(resumed.transcript) == 200 and all(gc.is_tracked(o) for o in built)
    assert in_generation(built, 2)
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing left frozen


def test_objects_frozen_by_someone_else_stay_frozen():
    assert gc.isenabled()
    gc.unfreeze()  # (see above), so that the count below is this test's own
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with paused_gc():
            built = [[n] for n in range(100)]
            assert not gc.isenabled()
        # Still held (an unfreeze would leave none) and the block's own objects not added;
        # a frozen object that dies meanwhile (another thread of a busy worker) leaves it.
        assert gc.isenabled() and 0 < gc.get_freeze_count() <= frozen
        assert not in_generation(built, 2)  # left to the collector's own schedule
    finally:
        gc.unfreeze()


def test_a_paused_block_inside_a_disabled_collector_changes_nothing():
    gc.disable()
    try:
        with paused_gc():
            built = [[n] for n in range(100)]
        assert not gc.isenabled() and gc.get_freeze_count() == 0
        assert not in_generation(built, 2)
    finally:
        gc.enable()
