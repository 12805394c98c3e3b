"""Topic naming (PH-11): after the first turn, the ``topic`` prompt names the session in
one short line, shown by ``/sessions`` and the sidebar.

Config ``topicNaming: false`` turns it off (SPEC §11). The environment variable
``CRYSTAL_TOPIC_NAMING=off`` does the same for a whole process tree; the test suite
sets it so that scripted model queues only see the requests a test scripts. A failure
(no answer, an error, a timeout) leaves the session unnamed with one note.

Config ``topicModel`` (``[PROVIDER:]MODEL``, SPEC §12) names a small side model for the
request, so naming does not cost a request to the session's large model. Under replay
the cassette answers: a recording holds the topic request (the recording provider
records side requests too, ``topicModel``'s included), and a cassette recorded without
one leaves the session unnamed quietly — naming never fails or clutters a replay.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from crystal_kernel.host.sidecall import SideCallError, complete_text, render_conversation

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

TOPIC_TIMEOUT = 20.0
MAX_TOPIC = 80


def topic_naming_enabled(session: Session) -> bool:
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


def topic_provider(session: Session) -> Any:
    """``topicModel``'s provider (made for this one request), else the session's. Under
    replay always the session's: the cassette holds whatever answered when recording."""
    spec = getattr(session.config, "topic_model", None)
    if not spec or getattr(session.provider, "name", "") == "replay":
        return session.provider
    from crystal_kernel.host.sidecall import make_side_provider

    return make_side_provider(session, spec)


async def name_session(session: Session) -> bool:
    """Name ``session`` when it has finished its first turn and has no topic yet.

    Never raises and never cancels the caller's bookkeeping: the loop calls it while
    closing a turn. Returns True when a topic was set.
    """
    if session.topic or session.turns != 1 or not topic_naming_enabled(session):
        return False
    replay = getattr(session.provider, "name", "") == "replay"
    provider: Any = None
    try:
        from crystal_kernel.prompts.compose import compose_named

        provider = topic_provider(session)
        system = compose_named("topic", session)
        conversation = render_conversation(session.transcript, limit=6_000, result_limit=300,
                                           argument_limit=200, text_limit=2_000)
        answer = await complete_text(session, provider, system=system, user=conversation,
                                     purpose="topic", timeout=TOPIC_TIMEOUT, max_chars=500,
                                     max_output_tokens=60)
    except SideCallError as exc:
        if not replay:  # a cassette recorded without a topic request is not a problem
            session.note(f"The session was left unnamed: {str(exc).rstrip('.')}.")
        return False
    except asyncio.CancelledError:
        # The person stopped the turn while it was being named: leave it unnamed.
        return False
    except Exception as exc:
        session.note(f"The session was left unnamed: {type(exc).__name__}: {str(exc).rstrip('.')}.")
        return False
    finally:
        if provider is not None and provider is not session.provider:
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:
                    pass
    topic = clean_topic(answer)
    if not topic:
        session.note("The session was left unnamed: the topic answer was empty.")
        return False
    session.topic = topic
    return True
