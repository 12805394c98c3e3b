"""An in-process provider that plays back scripted replies, for host tests.

Each call to :meth:`ScriptedProvider.stream` takes the next entry of ``replies``:

- a list of stream items (``TextChunk``, ``ToolCallChunk``, ``UsageChunk``, ``Finished``),
  optionally mixed with :class:`Delay` (sleep before the next item), :data:`HANG` (block
  until cancelled, bounded by ``hang_timeout``) and :class:`Fail` (raise an exception after
  the items before it were yielded — a stream that breaks mid-answer);
- a callable ``(request) -> list`` of the same, for replies that depend on the request;
- an exception instance, raised before anything is yielded.

``text_reply`` and ``tool_reply`` build the common forms. A reply that does not end with
``Finished`` gets one appended (``tool_use`` when it holds tool calls, else ``end_turn``).
Every request is recorded in ``.requests``; running out of replies raises a clear
``AssertionError`` naming how many replies were scripted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from crystal_kernel.core.interaction import ApprovalRequest, PersonDecision
from crystal_kernel.providers.base import (
    Capabilities,
    Finished,
    ModelRequest,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)


@dataclass(frozen=True)
class Delay:
    """Sleep this many seconds before the next item."""

    seconds: float


@dataclass(frozen=True)
class Fail:
    """Raise ``error`` at this point of the stream (after the earlier items were yielded)."""

    error: BaseException


class _Hang:
    def __repr__(self) -> str:
        return "HANG"


#: Block the stream until the consumer cancels it (bounded by ``hang_timeout``).
HANG = _Hang()

ScriptItem = StreamItem | Delay | Fail | _Hang
Reply = Sequence[ScriptItem] | Callable[[ModelRequest], Sequence[ScriptItem]] | BaseException


def text_reply(text: str, *, chunk: int = 0, usage: tuple[int, int] | None = (10, 5)) -> list[ScriptItem]:
    """A plain text answer; ``chunk`` > 0 splits the text into pieces of that size."""
    items: list[ScriptItem] = []
    if chunk > 0:
        items.extend(TextChunk(text[i:i + chunk]) for i in range(0, len(text), chunk))
    elif text:
        items.append(TextChunk(text))
    if usage is not None:
        items.append(UsageChunk(*usage))
    items.append(Finished("end_turn"))
    return items


_call_counter = 0


def tool_reply(
    calls: Iterable[tuple[str, dict[str, Any] | str]],
    text: str | None = None,
    *,
    usage: tuple[int, int] | None = (10, 5),
) -> list[ScriptItem]:
    """Optional text, then tool calls ``(name, arguments)``; arguments may be a dict or raw text."""
    global _call_counter
    items: list[ScriptItem] = []
    if text:
        items.append(TextChunk(text))
    for name, arguments in calls:
        _call_counter += 1
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        items.append(ToolCallChunk(id=f"call_{_call_counter}", name=name, arguments=raw))
    if usage is not None:
        items.append(UsageChunk(*usage))
    items.append(Finished("tool_use"))
    return items


class ScriptedProvider:
    """A :class:`~crystal_kernel.providers.base.Provider` that plays ``replies`` in order."""

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        capabilities: Capabilities | None = None,
        name: str = "scripted",
        model: str = "scripted",
        hang_timeout: float = 30.0,
    ) -> None:
        self.replies: list[Reply] = list(replies)
        self.capabilities = capabilities or Capabilities()
        self.name = name
        self.model = model
        self.hang_timeout = hang_timeout
        self.requests: list[ModelRequest] = []
        self.closed = False
        # Set when a stream was cancelled or closed by its consumer before it finished.
        self.cancelled = 0
        self._next = 0

    def add(self, *replies: Reply) -> None:
        """Append more replies to the script."""
        self.replies.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        # A copy: the caller may keep appending to the transcript list it passed.
        self.requests.append(replace(request, messages=list(request.messages), tools=list(request.tools)))
        if self._next >= len(self.replies):
            raise AssertionError(
                f"ScriptedProvider ran out of replies: {len(self.replies)} scripted, "
                f"request {len(self.requests)} asked for one more."
            )
        reply = self.replies[self._next]
        self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        items = list(reply(request) if callable(reply) else reply)
        if not any(isinstance(i, (Finished, Fail, _Hang)) for i in items):
            has_calls = any(isinstance(i, ToolCallChunk) for i in items)
            items.append(Finished("tool_use" if has_calls else "end_turn"))
        finished = False
        try:
            for item in items:
                if isinstance(item, Delay):
                    await asyncio.sleep(item.seconds)
                elif isinstance(item, Fail):
                    raise item.error
                elif isinstance(item, _Hang):
                    await asyncio.sleep(self.hang_timeout)
                    raise AssertionError(f"ScriptedProvider hang was not cancelled within {self.hang_timeout} s.")
                else:
                    yield item
            finished = True
        finally:
            if not finished:
                self.cancelled += 1

    async def aclose(self) -> None:
        self.closed = True


class ScriptedPerson:
    """A front with a person who answers approval requests in order (a string is an
    outcome: ``"allow_once"``, ``"allow_session"``, ``"deny"``) and dismisses questions.
    ``requests`` holds every approval request it was shown."""

    person_present = True

    def __init__(self, *answers: PersonDecision | str) -> None:
        self.answers = [a if isinstance(a, PersonDecision) else PersonDecision.model_validate({"outcome": a})
                        for a in answers]
        self.requests: list[ApprovalRequest] = []

    async def ask_questions(self, questions: Any) -> None:
        return None

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        self.requests.append(request)
        return self.answers.pop(0)

