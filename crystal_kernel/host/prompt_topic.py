"""What names a session while it has no topic: its first prompt, shortened and made safe
to show on one line (``/sessions``, the sidebar, an ACP client's session list).

Topic naming (host/topic.py) replaces it after the first turn when it is on; when it is
off, fails or has not run yet, a person still sees what the session was about rather
than a bare id. A session file is a workspace file, so a label read back from one is
cleaned again before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the kernel imports this module at start, before any message exists
    from crystal_kernel.core.messages import Message

MAX_PROMPT_TOPIC = 60
# Characters a one-line label never shows: C0 and C1 controls, zero-width and bidi
# formatting characters (text that reads otherwise than it is, TRUST-6).
_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def prompt_topic(text: str) -> str | None:
    """``text``'s first non-empty line, whitespace collapsed, controls and invisible
    formatting characters dropped, at most ``MAX_PROMPT_TOPIC`` characters (the cut
    marked with …). None when nothing is left."""
    for raw in text[:4000].splitlines():
        line = " ".join(_UNSHOWN.sub(" ", raw).split())
        if line:
            return line if len(line) <= MAX_PROMPT_TOPIC else line[: MAX_PROMPT_TOPIC - 1].rstrip() + "…"
    return None


def first_prompt_topic(history: Sequence[Message]) -> str | None:
    """:func:`prompt_topic` of the person's first prompt in ``history`` (a compaction
    summary or a tool result is no prompt); only the first few messages are looked at."""
    for message in history[:8]:
        if message.role == "user" and message.meta.get("kind") != "summary" and not message.tool_results():
            return prompt_topic(message.text())
    return None
