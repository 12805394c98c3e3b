"""A turn's events as ACP session updates: the ACP front's one ``render``.

Text deltas become agent message chunks, reasoning and notes become thoughts, tool
calls become tool-call updates (kind, locations, diffs), a changed todo list becomes the
session's plan. Every member of :data:`~crystal_kernel.core.events.Event` has its case;
a new event fails type checking at ``assert_never`` until it has one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.schema import UsageUpdate
from typing_extensions import assert_never

from crystal_kernel.acp.mapping import plan_update, result_content, tool_kind, tool_locations, tool_title
from crystal_kernel.core.events import (
    ApprovalEvent,
    Compacted,
    ErrorEvent,
    Event,
    Note,
    ReasoningDelta,
    TextDelta,
    TodosUpdated,
    ToolCallStarted,
    ToolProgress,
    ToolResultEvent,
    TurnEnd,
    TurnStarted,
    UsageEvent,
)

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


class TurnUpdates:
    """Sends one turn's events to the client as they come, and keeps what the prompt's
    response needs: the tokens used and the errors still to be said.

    ``announced`` maps a call id to an event set once its tool-call update went out (the
    permission request waits for it, acp/interaction.py); ``turn_error`` gives the error
    that ended the turn, which the prompt answers as a JSON-RPC error instead."""

    def __init__(self, session: Session, send: Callable[[Any], Awaitable[None]],
                 announced: dict[str, asyncio.Event], turn_error: Callable[[], str | None]) -> None:
        self.session = session
        self._send = send
        self._announced = announced
        self._turn_error = turn_error
        self.tokens_in = 0
        self.tokens_out = 0
        # Tokens of the latest request: how full the context window is.
        self._last_request = 0
        self.errors: list[str] = []
        self._started: set[str] = set()

    async def render(self, event: Event) -> None:
        """Send what ``event`` means to the client (or note it for the response)."""
        match event:
            case TurnStarted():
                pass  # the client started the turn itself with session/prompt
            case TextDelta():
                await self._send(update_agent_message_text(event.text))
            case ReasoningDelta():
                # The model's reasoning: a thought, shown apart from the answer.
                await self._send(update_agent_thought_text(event.text))
            case ToolCallStarted():
                await self._send(start_tool_call(
                    event.id, tool_title(event.name, event.arguments), kind=tool_kind(event.name), status="pending",
                    locations=tool_locations(self.session, event.name, event.arguments) or None,
                    raw_input=event.arguments,
                ))
                self._announced.setdefault(event.id, asyncio.Event()).set()
                self._started.add(event.id)
            case ToolProgress():
                if event.id in self._started:
                    await self._send(update_tool_call(
                        event.id, status="in_progress",
                        content=[tool_content(text_block(f"progress {event.line()}"))]))
            case ApprovalEvent():
                if event.outcome == "allow":
                    await self._send(update_tool_call(event.id, status="in_progress"))
            case ToolResultEvent():
                if event.id not in self._started:  # cancelled before it started: announce it first
                    await self._send(start_tool_call(
                        event.id, tool_title(event.name, {}), kind=tool_kind(event.name), status="pending"))
                    self._started.add(event.id)
                await self._send(update_tool_call(
                    event.id, status="completed" if event.ok else "failed", content=result_content(event),
                ))
                self._announced.pop(event.id, None)
            case TodosUpdated():
                await self._send(plan_update(event.todos))  # MODE-5: the plan is the session's
            case Compacted():
                await self._send(update_agent_thought_text(f"Note: {event.line()}\n"))
            case Note():
                await self._send(update_agent_thought_text(f"Note: {event.text}\n"))
            case UsageEvent():
                self.tokens_in += event.input_tokens
                self.tokens_out += event.output_tokens
                self._last_request = event.input_tokens + event.output_tokens
            case ErrorEvent():
                if event.message != self._turn_error():
                    self.errors.append(event.message)
            case TurnEnd():
                pass  # the prompt's response carries the stop reason
            case _:
                assert_never(event)

    async def finish(self) -> None:
        """After the last event: how full the context window is after the last request."""
        if self._last_request:
            await self._send(UsageUpdate(
                session_update="usage_update", used=self._last_request,
                size=max(self.session.capabilities.context_window, self._last_request)))
