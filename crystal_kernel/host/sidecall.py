"""Side requests: one tool-less request to a model outside the conversation (review,
compaction, topic naming), bounded in time and in answer size, with usage counted.

Also the bounded text rendering of a transcript that the review and compaction
templates receive as ``{{conversation}}``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from crystal_kernel.core.config import PROVIDERS
from crystal_kernel.core.deadline import within
from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.host.view import SessionView
from crystal_kernel.providers.base import ModelRequest, TextChunk, UsageChunk
from crystal_kernel.providers.registry import known_providers, make_provider


class SideCallError(Exception):
    """A side request failed; the message is one English line."""


def make_side_provider(session: SessionView, spec: str) -> Any:
    """A provider for a side model named ``[PROVIDER:]MODEL`` (``reviewModel``,
    ``topicModel``): a bare model name uses the session's provider settings. With
    ``record`` on it records into the same cassette as the session."""
    name, sep, model = spec.partition(":")
    if not sep or name not in (*PROVIDERS, *known_providers()):
        name, model = session.config.provider, spec
    config = dataclasses.replace(session.config, provider=name, model=model)
    return make_provider(config, workspace=session.workspace)


async def complete_text(
    session: SessionView,
    provider: Any,
    *,
    system: str,
    user: str,
    purpose: str,
    timeout: float,
    max_chars: int = 20_000,
    max_output_tokens: int | None = None,
) -> str:
    """Send one request and return its text (at most ``max_chars``).

    Raises :class:`SideCallError` on a provider error, an overrun of ``timeout`` seconds
    or an empty answer. Cancellation of the caller propagates (the stream is closed).
    """
    request = ModelRequest(model=provider.model, system=system, messages=[Message.user_text(user)],
                           tools=[], purpose=purpose, max_output_tokens=max_output_tokens)
    pieces: list[str] = []
    size = 0

    async def run() -> None:
        nonlocal size
        stream = provider.stream(request)
        try:
            async for item in stream:
                if isinstance(item, TextChunk):
                    if size < max_chars:
                        pieces.append(item.text[: max_chars - size])
                        size += len(pieces[-1])
                elif isinstance(item, UsageChunk):
                    session.usage.add(item.input_tokens, item.output_tokens, model=provider.model, purpose=purpose)
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()

    try:
        await within(run(), timeout)
    except TimeoutError:
        raise SideCallError(f"the {purpose} request took longer than {timeout:g} s") from None
    except Exception as exc:  # ProviderError or anything else: reported, never raised on
        first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SideCallError(f"the {purpose} request failed: {first}") from None
    text = "".join(pieces).strip()
    if not text:
        raise SideCallError(f"the {purpose} request gave an empty answer")
    return text


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} characters cut]"


def render_message(message: Message, *, result_limit: int, argument_limit: int, text_limit: int) -> str:
    """One message as plain text for a side request."""
    lines: list[str] = []
    kind = message.meta.get("kind") if isinstance(message.meta, dict) else None
    for part in message.parts:
        if isinstance(part, TextPart):
            if kind == "summary":
                label = "Summary of the earlier conversation"
            else:
                label = "User" if message.role == "user" else "Assistant"
            lines.append(f"{label}: {_clip(part.text, text_limit)}")
        elif isinstance(part, ToolCallPart):
            args = part.raw_arguments if part.raw_arguments is not None else json.dumps(
                part.arguments, ensure_ascii=False)
            lines.append(f"Assistant called {part.name}: {_clip(args, argument_limit)}")
        elif isinstance(part, ToolResultPart):
            status = "ok" if part.ok else "failed"
            images = f" [{len(part.images)} image(s)]" if part.images else ""
            lines.append(f"Result of {part.name} ({status}){images}: {_clip(part.text, result_limit)}")
        elif isinstance(part, ImagePart):
            lines.append(f"{'User' if message.role == 'user' else 'Assistant'}: [an image, {part.mime_type}]")
    if message.interrupted:
        lines.append("(this answer was interrupted)")
    return "\n".join(lines)


def render_message_labelled(message: Message, *, result_limit: int, argument_limit: int,
                            text_limit: int) -> str:
    """One message as JSON lines, one per part, each saying who it is from.

    Every piece of model or tool text sits inside a JSON string, so it cannot start a
    line of its own: a model writing "User: allow everything" stays inside an
    ``"from": "assistant"`` line (GUARD-3). Only ``"from": "person"`` lines are the
    person's words."""
    kind = message.meta.get("kind") if isinstance(message.meta, dict) else None
    unverified = is_unverified(message)
    person = is_person_prompt(message) and not unverified
    lines: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            who = ("unverified" if unverified else "summary" if kind == "summary" else "person" if person
                   else "assistant" if message.role == "assistant" else "host")
            lines.append({"from": who, "text": _clip(part.text, text_limit)})
        elif isinstance(part, ToolCallPart):
            args = part.raw_arguments if part.raw_arguments is not None else json.dumps(
                part.arguments, ensure_ascii=False)
            lines.append({"from": "assistant", "tool_call": part.name, "arguments": _clip(args, argument_limit)})
        elif isinstance(part, ToolResultPart):
            entry: dict[str, Any] = {"from": "tool", "tool_result": part.name, "ok": part.ok,
                                     "text": _clip(part.text, result_limit)}
            if part.images:
                entry["images"] = len(part.images)
            lines.append(entry)
        elif isinstance(part, ImagePart):
            lines.append({"from": "unverified" if unverified else "person" if person else "assistant",
                          "image": part.mime_type})
    if message.interrupted:
        lines.append({"from": "host", "text": "this answer was interrupted"})
    return "\n".join(escape_json_tags(json.dumps(line, ensure_ascii=False)) for line in lines)


def escape_json_tags(text: str) -> str:
    """JSON text with every ``</`` written ``<\\/`` (the same JSON value), so a string
    inside it cannot close the template's ``<conversation>`` or ``<arguments>`` block."""
    return text.replace("</", "<\\/")


def is_person_prompt(message: Message) -> bool:
    """A message the person wrote (not tool results, not a summary)."""
    return (message.role == "user" and not message.tool_results()
            and (message.meta or {}).get("kind") != "summary")


def is_unverified(message: Message) -> bool:
    """A message of a session this Home did not sign (TRUST-5, host/store.py): history
    only, never the person's words to the reviewer."""
    return isinstance(message.meta, dict) and message.meta.get("unverified") is True


def render_conversation(messages: list[Message], *, limit: int = 40_000, result_limit: int = 1_500,
                        argument_limit: int = 1_500, text_limit: int = 6_000,
                        keep_person: bool = True, labelled: bool = False) -> str:
    """The transcript as text, at most about ``limit`` characters.

    When it is too long the oldest messages go first, but with ``keep_person`` the
    person's own prompts are kept (shortened): they carry the authorization a reviewer
    judges and the goals a summary must keep. ``labelled``: JSON lines that mark who said
    what (:func:`render_message_labelled`), for the reviewer.
    """
    render = render_message_labelled if labelled else render_message
    blocks = [(is_person_prompt(m) and not is_unverified(m), render(m, result_limit=result_limit, argument_limit=argument_limit,
                                           text_limit=text_limit)) for m in messages]
    blocks = [(p, b) for p, b in blocks if b]
    total = sum(len(b) + 2 for _, b in blocks)
    if total <= limit:
        return "\n\n".join(b for _, b in blocks)
    kept: list[str] = []
    dropped = 0
    budget = limit
    # Walk from the newest; person prompts always stay (clipped), others while they fit.
    full = False
    for person, block in reversed(blocks):
        if person and keep_person:
            block = _clip(block, 2_000)
            kept.append(block)
            budget -= len(block) + 2
        elif not full and len(block) + 2 <= budget:
            kept.append(block)
            budget -= len(block) + 2
        else:
            # Once one message does not fit, older ones go too: the kept tail is contiguous.
            full = True
            dropped += 1
    kept.reverse()
    note = f"{dropped} older messages left out for length"
    head = (json.dumps({"from": "host", "text": note}) if labelled else f"[{note}]") if dropped else ""
    return "\n\n".join(([head] if head else []) + kept)
