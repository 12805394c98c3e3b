"""Topic naming (PH-11): after the first turn, the ``topic`` prompt names the session in
one short line, shown by ``/sessions`` and the sidebar.

Config ``topicNaming: false`` turns it off (SPEC §11). The environment variable
``CRYSTAL_TOPIC_NAMING=off`` does the same for a whole process tree; the test suite
sets it so that scripted model queues only see the requests a test scripts. A failure
(no answer, an error, a timeout) leaves the session unnamed with one note.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from crystal_kernel.host.sidecall import SideCallError, complete_text, render_conversation

TOPIC_TIMEOUT = 20.0
MAX_TOPIC = 80


def topic_naming_enabled(session: Any) -> bool:
    if os.environ.get("CRYSTAL_TOPIC_NAMING", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return bool(getattr(session.config, "topic_naming", True))


def clean_topic(text: str) -> str:
    """The first non-empty line, without quotes, a "Title:" label or a trailing period."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.lstrip("#*-> ").strip()
    for label in ("title:", "topic:"):
        if line.lower().startswith(label):
            line = line[len(label):].strip()
    line = line.strip("\"'`*“”‘’ ").rstrip(".").strip()
    if len(line) > MAX_TOPIC:
        line = line[: MAX_TOPIC - 1].rstrip() + "…"
    return line


async def name_session(session: Any) -> bool:
    """Name ``session`` when it has finished its first turn and has no topic yet.

    Never raises and never cancels the caller's bookkeeping: the loop calls it while
    closing a turn. Returns True when a topic was set.
    """
    if session.topic or session.turns != 1 or not topic_naming_enabled(session):
        return False
    try:
        from crystal_kernel.prompts.compose import compose_named

        system = compose_named("topic", session)
        conversation = render_conversation(session.transcript, limit=6_000, result_limit=300,
                                           argument_limit=200, text_limit=2_000)
        answer = await complete_text(session, session.provider, system=system, user=conversation,
                                     purpose="topic", timeout=TOPIC_TIMEOUT, max_chars=500,
                                     max_output_tokens=60)
    except SideCallError as exc:
        session.note(f"The session was left unnamed: {exc}.")
        return False
    except asyncio.CancelledError:
        # The person stopped the turn while it was being named: leave it unnamed.
        return False
    except Exception as exc:
        session.note(f"The session was left unnamed: {type(exc).__name__}: {exc}.")
        return False
    topic = clean_topic(answer)
    if not topic:
        session.note("The session was left unnamed: the topic answer was empty.")
        return False
    session.topic = topic
    return True
