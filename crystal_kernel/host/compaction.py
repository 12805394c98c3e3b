"""Compaction: summarise older turns so a long session fits the model's context window.

Automatic before a request whose estimated size reaches ``compactionThreshold`` (a
fraction, default 0.8) of the context window (config ``contextWindow``, else the
model's), and on demand with ``/compact [focus]``.

The request uses the named prompts ``compaction.system`` and ``compaction.user`` with
every PH-7 slot: ``conversation`` (the part being summarised, as text),
``prior_summary_section`` (an earlier compaction's summary, if any), ``summary_task``
(what to do, and the person's focus for ``/compact``), ``output_template`` (the format,
host-owned so a replaced compaction.user.md may drop it, PS-6) and ``todos_section``.

The transcript keeps one summary message plus the most recent messages, cut only where
no tool call is separated from its result. ``session.history`` keeps the full record;
the session's todos are untouched and repeated in the summary message.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.events import Compacted, Event, Note
from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.prefix import PrefixFold
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.host.sidecall import SideCallError, complete_text, is_person_prompt, render_conversation

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

# Share of the window the kept recent messages may take.
KEEP_FRACTION = 0.25
# A rough image cost in tokens (providers bill images by size; this is a safe middle).
IMAGE_TOKENS = 1_600
CHARS_PER_TOKEN = 4
COMPACTION_TIMEOUT = 180.0
# After a failed automatic compaction, wait for this many new messages before retrying.
RETRY_AFTER_MESSAGES = 4

OUTPUT_TEMPLATE = """## Goal
What the user wants overall, with their explicit instructions quoted briefly.

## Done so far
Decisions made (and why), changes made, commands run and their important results.

## Files
Each relevant file or folder with what was learned or changed there.

## Open problems
Errors, failing tests and open questions still unresolved.

## Next steps
What the agent should do next, in order."""

AUTO_TASK = ("The conversation has grown too long for the model's context window. Summarise the part "
             "above so the agent can continue seamlessly; the most recent messages are kept as they "
             "are and follow your summary.")
MANUAL_TASK = ("The user asked to compact the conversation now. Summarise the part above so the agent "
               "can continue seamlessly; the most recent messages are kept as they are and follow your "
               "summary.")


@dataclass
class CompactionResult:
    summarised: int
    kept: int
    before_tokens: int
    after_tokens: int

    def event(self) -> Compacted:
        """The event a turn yields for it."""
        return Compacted(summarised=self.summarised, kept=self.kept, before_tokens=self.before_tokens,
                         after_tokens=self.after_tokens)

    def describe(self) -> str:
        return self.event().line()


class NothingToCompact(Exception):
    pass


# ----- sizes ------------------------------------------------------------------------

def _text_size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False))


class _IdentityCache:
    """Sizes keyed by ``id(obj)``, holding ``obj`` so its id cannot be reused while cached;
    emptied when full, since what it holds is cheap to recompute."""

    def __init__(self, compute: Callable[[Any], int], limit: int) -> None:
        self._compute = compute
        self._limit = limit
        self._sizes: dict[int, tuple[Any, int]] = {}

    def __call__(self, obj: Any) -> int:
        hit = self._sizes.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        size = self._compute(obj)
        if len(self._sizes) >= self._limit:
            self._sizes.clear()
        self._sizes[id(obj)] = (obj, size)
        return size


def _message_tokens(message: Message) -> int:
    chars = 16  # role and framing
    images = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.name) + _text_size(part.raw_arguments or part.arguments) + 16
        elif isinstance(part, ToolResultPart):
            chars += len(part.text) + 16
            images += len(part.images)
        elif isinstance(part, ImagePart):
            images += 1
    return chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS


# Transcript messages are not changed once appended, so a message's size is cached.
_message_sizes = _IdentityCache(_message_tokens, 8192)


def message_tokens(message: Message) -> int:
    """The estimated tokens of one message (cached: this runs before every step)."""
    return _message_sizes(message)


def _spec_size(spec: ToolSpec) -> int:
    return len(spec.name) + len(spec.description) + _text_size(spec.input_schema)


# Tool specs are built once per catalog (and frozen), so this saves serialising their
# schemas on every step.
_spec_sizes = _IdentityCache(_spec_size, 1024)


# The messages' total of the last request, kept for its unchanged prefix: the step before
# a request adds only its new messages instead of walking the whole transcript.
_transcript_tokens = PrefixFold(lambda total, message: total + message_tokens(message), 0)


def estimate_tokens(request: Any) -> int:
    """A rough size of a request: about four characters per token, images flat."""
    chars = len(request.system or "")
    for spec in request.tools or []:
        chars += _spec_sizes(spec)
    return chars // CHARS_PER_TOKEN + int(_transcript_tokens(request.messages))


def context_window(session: Session) -> int:
    """config contextWindow when set (it overrides the capability table), else the
    provider's; a server that refused a request as too long lowers both (loop.py)."""
    configured = session.config.context_window
    return int(configured) if configured else int(session.capabilities.context_window)


def threshold_tokens(session: Session) -> int:
    return int(context_window(session) * float(session.config.compaction_threshold))


def keep_budget_tokens(session: Session, request: Any) -> int:
    """How many tokens of recent messages to keep: a quarter of the window, and never
    more than half of what the threshold leaves beside the system text and tools, so
    the next request lands well below the threshold."""
    fixed = estimate_tokens(dataclasses.replace(request, messages=[]))
    room = max(0, threshold_tokens(session) - fixed)
    return int(min(context_window(session) * KEEP_FRACTION, room / 2))


# ----- where to cut ------------------------------------------------------------------

def _is_results(message: Message) -> bool:
    return message.role == "user" and bool(message.tool_results())


def _is_summary(message: Message) -> bool:
    return (message.meta or {}).get("kind") == "summary"


def choose_cut(messages: list[Message], keep_budget: int, *, manual: bool) -> int | None:
    """The index where the kept tail starts, or None when nothing can be summarised.

    A cut never starts the tail with tool results (their calls would be summarised
    away). Automatic: the longest tail within ``keep_budget``, else the shortest
    possible tail. Manual: the same, but at most the latest person turn.
    """
    start = 1 if messages and _is_summary(messages[0]) else 0
    cuts = [i for i in range(start + 1, len(messages)) if not _is_results(messages[i])]
    if not cuts:
        return None
    sizes = [message_tokens(m) for m in messages]
    tail = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        tail[i] = tail[i + 1] + sizes[i]
    budget = keep_budget
    if manual:
        prompts = [i for i in cuts if is_person_prompt(messages[i])]
        if prompts:
            budget = min(budget, tail[prompts[-1]])
    fitting = [i for i in cuts if tail[i] <= budget]
    cut = fitting[0] if fitting else cuts[-1]
    if cut - start < (2 if manual else 1):
        return None
    return cut


# ----- the request ------------------------------------------------------------------

def todos_text(session: Session) -> str:
    todos = list(getattr(session, "todos", []) or [])
    if not todos:
        return ""
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    lines = [f"- {marks.get(t.status, '[ ]')} {t.content}" for t in todos]
    return "Current todo list (kept by the session):\n" + "\n".join(lines)


def compaction_slots(session: Session, head: list[Message], prior: str | None, *, manual: bool,
                     focus: str | None) -> dict[str, str]:
    """The five PH-7 slots of compaction.user."""
    window_chars = context_window(session) * CHARS_PER_TOKEN
    task = MANUAL_TASK if manual else AUTO_TASK
    if focus:
        task += f" The user asked the summary to focus on: {focus}"
    todos = todos_text(session)
    return {
        # The summariser must fit the part it reads: at most half the window.
        "conversation": render_conversation(head, limit=max(8_000, window_chars // 2), result_limit=3_000,
                                            argument_limit=2_000, text_limit=12_000),
        "prior_summary_section": (f"A summary of the conversation before this part, from an earlier "
                                  f"compaction:\n\n<prior_summary>\n{prior}\n</prior_summary>") if prior else "",
        "summary_task": task,
        "output_template": OUTPUT_TEMPLATE,
        "todos_section": (f"{todos}\nMention which of these are done, in progress or pending."
                          if todos else ""),
    }


def _summary_message(summary: str, session: Session, summarised: int) -> Message:
    text = ("[This conversation was compacted to fit the context window. Summary of the earlier part:]\n\n"
            + summary.strip())
    todos = todos_text(session)
    if todos:
        text += "\n\n" + todos
    return Message(role="user", parts=[TextPart(text=text)],
                   meta={"kind": "summary", "summarised": summarised,
                         "time": datetime.now(timezone.utc).isoformat(timespec="seconds")})


async def compact(session: Session, *, manual: bool = False, focus: str | None = None) -> CompactionResult:
    """Summarise the older part of ``session.transcript``.

    Raises :class:`NothingToCompact`, or :class:`SideCallError` when the model gave no
    summary; the transcript is unchanged then.
    """
    messages = list(session.transcript)
    await session.prepare_tools()  # the request counts the tool specs; never block the loop
    request = session.build_request("compaction")
    before = estimate_tokens(request)
    keep_budget = keep_budget_tokens(session, request)
    cut = choose_cut(messages, keep_budget, manual=manual)
    if cut is None:
        raise NothingToCompact()
    prior = messages[0].text() if messages and _is_summary(messages[0]) else None
    head = messages[1 if prior is not None else 0: cut]
    from crystal_kernel.prompts.compose import compose_named

    system = compose_named("compaction.system", session)
    user = compose_named("compaction.user", session,
                         extra=compaction_slots(session, head, prior, manual=manual, focus=focus))
    # The summary itself must stay small beside the kept messages: an eighth of the window.
    summary_tokens = max(256, min(8_000, context_window(session) // 8))
    summary = await complete_text(session, session.provider, system=system, user=user, purpose="compaction",
                                  timeout=COMPACTION_TIMEOUT, max_chars=summary_tokens * CHARS_PER_TOKEN,
                                  max_output_tokens=summary_tokens)
    # The transcript may not have changed meanwhile (turns and commands do not overlap).
    session.transcript[:] = [_summary_message(summary, session, len(head)), *messages[cut:]]
    after = estimate_tokens(session.build_request("compaction"))
    return CompactionResult(len(head), len(messages) - cut, before, after)


async def auto_compact(session: Session, request: Any, emit: Callable[[Event], None] | None = None) -> bool:
    """Compact before ``request`` when it nears the window; True when it did (and a
    :class:`Compacted` event says so).

    A failure is a note and the request goes out as it is.
    """
    size = estimate_tokens(request)
    if size < threshold_tokens(session):
        return False
    if len(session.transcript) < session.live.compaction_retry_at:
        return False
    try:
        result = await compact(session)
    except NothingToCompact:
        if not session.live.compaction_warned:
            session.live.compaction_warned = True
            _note(session, emit, f"The conversation (about {size} tokens) is near the context window "
                                 f"({context_window(session)}), and nothing older is left to summarise.")
        return False
    except SideCallError as exc:
        # Try again only once the conversation has grown a little, not on every step.
        session.live.compaction_retry_at = len(session.transcript) + RETRY_AFTER_MESSAGES
        _note(session, emit, f"Compaction failed ({exc}); the conversation was kept as it was.")
        return False
    session.live.compaction_warned = False
    if emit is not None:
        emit(result.event())
    else:
        session.note(result.describe())
    return True


def _note(session: Session, emit: Callable[[Event], None] | None, text: str) -> None:
    if emit is not None:
        emit(Note(text=text))
    else:
        session.note(text)


async def compact_command(session: Session, focus: str | None = None) -> str:
    """/compact [FOCUS…]: summarise older turns now."""
    if session.busy:
        raise UserError("Cannot compact while a turn is running.")
    try:
        result = await compact(session, manual=True, focus=focus)
    except NothingToCompact:
        return "Nothing to compact yet: the conversation is only its latest turn."
    except SideCallError as exc:
        raise UserError(f"Compaction failed: {exc}; the conversation was kept as it was.") from None
    session.save()
    return result.describe()
