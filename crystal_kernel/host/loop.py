"""One turn: request -> stream -> tool calls -> approval -> results -> repeat.

:class:`Turn` runs the turn body in its own task and hands events to the front through
a queue, so that :meth:`Turn.cancel` (Ctrl-C, the stop button) always ends with a
``TurnEnd(stopReason="cancelled")`` after the partial answer has been kept and the
running tool's processes killed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from typing_extensions import assert_never

from crystal_kernel.core.errors import NotSupported, ProviderError, ToolError, UserError
from crystal_kernel.core.events import (
    ErrorEvent,
    Event,
    Note,
    ReasoningDelta,
    StopReason,
    TextDelta,
    TodosUpdated,
    ToolCallStarted,
    ToolProgress,
    ToolResultEvent,
    ToolStatus,
    TurnEnd,
    TurnStarted,
    UsageEvent,
)
from crystal_kernel.core.interaction import Interaction, NoPerson
from crystal_kernel.core.messages import Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.secrets import host_secret_values, redact_text
from crystal_kernel.core.textsafe import MAX_ARGUMENT_DEPTH, clean_text, clean_value, nesting_depth
from crystal_kernel.core.todos import Todo
from crystal_kernel.host.approval import forbidden_match, host_outcome, is_plain_read
from crystal_kernel.host.approval_flow import decide
from crystal_kernel.host.compaction import NothingToCompact, auto_compact, compact, estimate_tokens
from crystal_kernel.host.person_deadline import with_person_deadline
from crystal_kernel.host.session import Session
from crystal_kernel.host.sidecall import SideCallError
from crystal_kernel.host.topic import name_session
from crystal_kernel.jobs.sandbox import MISSING_NOTE, sandbox_state
from crystal_kernel.providers.base import (
    Finished,
    ModelRequest,
    ReasoningChunk,
    ReasoningItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from crystal_kernel.providers.common import context_overflow
from crystal_kernel.tools.base import ToolResult, truncate_output

NO_IMAGES = "This model cannot accept tool images."
# The window a refusal names: "maximum context length is 2048 tokens", "n_ctx: 4096", …
_STATED_WINDOW = re.compile(r"(?:context length|context window|context size|n_ctx)\D{0,24}?(\d{3,7})",
                            re.IGNORECASE)
_DONE = object()
# The model's stop reasons (Finished.stop_reason, as each protocol names them) -> the turn's.
_MODEL_STOPS: dict[str, StopReason] = {
    "end_turn": "end_turn", "stop": "end_turn", "tool_use": "end_turn", "tool_calls": "end_turn",
    "stop_sequence": "end_turn", "max_tokens": "max_tokens", "length": "max_tokens",
    "max_output_tokens": "max_tokens", "refusal": "refusal", "content_filter": "refusal"}


@dataclasses.dataclass
class _TurnUsage:
    """The tokens of one turn's model steps, for the session's usage rows."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def add(self, item: UsageChunk) -> None:
        self.input_tokens += item.input_tokens
        self.output_tokens += item.output_tokens
        self.reasoning_tokens += item.reasoning_tokens

    def row(self, model: str) -> dict[str, Any]:
        row: dict[str, Any] = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens, "model": model}
        if self.reasoning_tokens:
            row["reasoningTokens"] = self.reasoning_tokens
        return row


class _WindowProbe:
    """A local server's context window, asked once per provider (``discover_context``).
    A new conversation's first request goes out as it is whatever the window
    (compaction has nothing older to summarise), so it does not wait for the answer: the
    server is asked beside that request, and the answer is in before the next step is
    built (docs/benchmarks.md: start to first request). Otherwise it is asked first."""

    def __init__(self, probe: Callable[[], Awaitable[str | None]] | None, new_conversation: bool) -> None:
        self._probe = probe
        self._beside = new_conversation
        self._asking: asyncio.Future[str | None] | None = None

    async def before_first_step(self, learn: Callable[[Awaitable[str | None]], Awaitable[None]]) -> None:
        if self._probe is not None and not self._beside:
            await learn(self._probe())

    async def before_step(self, learn: Callable[[Awaitable[str | None]], Awaitable[None]]) -> None:
        """The answer of a probe asked beside the last request, before anything is built on it."""
        if self._asking is not None:
            asking, self._asking = self._asking, None
            await learn(asking)

    def request_going_out(self) -> None:
        """Runs once this step's request is on its way (the stream's first wait)."""
        if self._probe is not None and self._beside:
            self._asking, self._beside = asyncio.ensure_future(self._probe()), False

    def cancel(self) -> None:
        if self._asking is not None:
            self._asking.cancel()


class Turn:
    """A running turn. Iterate it for events; call :meth:`cancel` from any task."""

    def __init__(self, session: Session, prompt: str | list[Part], interaction: Interaction | None = None):
        self.session = session
        self.prompt = prompt
        # SPEC §13 Waits: every ask ends by personTimeoutSeconds, whatever the front.
        self.interaction = with_person_deadline(interaction or NoPerson(), session.config.person_timeout_seconds,
                                                session.note)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.stop_reason: StopReason | None = None
        # The one-line error that ended the turn, if any.
        self.error: str | None = None
        # Results of the calls of the current assistant message, as they finish.
        self._pending: list[ToolResultPart] | None = None
        # The todo list as the fronts last saw it (a TodosUpdated event when it changes).
        self._todos_seen: list[Todo] = []

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def __aiter__(self) -> AsyncIterator[Event]:
        if self.session.busy:
            raise RuntimeError("A turn is already running in this session.")
        self._task = asyncio.ensure_future(self._run())
        try:
            while True:
                item = await self._queue.get()
                if item is _DONE:
                    break
                yield item
        finally:
            # The consumer stopped early (or was cancelled itself): stop the body too.
            if not self._task.done():
                self._task.cancel()
                try:
                    await self._task
                except BaseException:
                    pass

    def _emit(self, event: Event) -> None:
        self._queue.put_nowait(event)

    def _emit_notes(self) -> None:
        for text in self.session.drain_notes():
            self._emit(Note(text=text))

    async def _run(self) -> None:
        session = self.session
        session.busy = True
        reason: StopReason = "end_turn"
        self._todos_seen = [t.model_copy() for t in session.todos]
        self._emit(TurnStarted(session_id=session.id, provider=session.provider.name, model=session.provider.model))
        try:
            reason = await self._body()
        except asyncio.CancelledError:
            reason = "cancelled"
        except (ProviderError, NotSupported) as exc:
            self.error = str(exc)
            self._emit(ErrorEvent(message=self.error))
            reason = "error"
        except Exception as exc:  # a bug: say so plainly, keep the session usable
            self.error = f"Internal error: {type(exc).__name__}: {exc}"
            self._emit(ErrorEvent(message=self.error))
            reason = "error"
        finally:
            session.busy = False
            self.stop_reason = reason
            self._close_open_calls()
            session.turns += 1
            if reason == "end_turn":
                # PH-11: name the session after its first turn (a failure is a note at most).
                await name_session(session)
            try:
                session.save()
            except Exception as exc:
                # The turn itself may have gone well, but what it did is not on disk: a
                # front must not report success (the CLI exits 2 with this line).
                self.error = str(exc) if isinstance(exc, UserError) else f"Could not save the session: {exc}"
                self._emit(ErrorEvent(message=self.error))
                reason = self.stop_reason = "error"
            self._emit_notes()
            self._emit(TurnEnd(session_id=session.id, stop_reason=reason))
            self._queue.put_nowait(_DONE)

    def _append(self, message: Message) -> None:
        self.session.transcript.append(message)
        self.session.history.append(message)

    def _close_open_calls(self) -> None:
        """Every tool call in the transcript gets a result, even after a cancel."""
        transcript = self.session.transcript
        if not transcript:
            return
        last = transcript[-1]
        if last.role != "assistant" or not last.tool_calls():
            return
        parts = list(self._pending or [])
        done = {p.call_id for p in parts}
        # Every call ends in a ToolResultEvent, also those the cancel kept from running.
        parts += [self._result(c, ToolResult.fail("Cancelled before it ran."), "cancelled")
                  for c in last.tool_calls() if c.id not in done]
        self._pending = None
        self._append(Message(role="user", parts=[*parts]))

    async def _body(self) -> StopReason:
        """Steps until the model answers without calls: build the request, stream one
        reply, run its calls; a refusal for length compacts and sends the step again once."""
        session = self.session
        prompt_parts: list[Part] = [TextPart(text=self.prompt)] if isinstance(self.prompt, str) else list(self.prompt)
        self._append(Message(role="user", parts=prompt_parts))
        self._emit_notes()
        window = _WindowProbe(getattr(session.provider, "discover_context", None), len(session.transcript) == 1)
        usage = _TurnUsage()
        steps = 0
        overflow_retried = False
        await window.before_first_step(self._learn_window)
        try:
            while True:
                if steps >= session.config.max_steps:
                    self._emit(Note(text=f"Stopped after {steps} model steps (maxSteps)."))
                    return "max_steps"
                steps += 1
                await window.before_step(self._learn_window)
                request = await self._prepare_request()
                window.request_going_out()
                answer = Message(role="assistant")
                try:
                    stop = await self._stream_reply(request, answer, usage)
                except ProviderError as exc:
                    if not answer.parts and not overflow_retried and context_overflow(exc):
                        # Our token estimate missed (a local server's window is often
                        # smaller than assumed): compact, then send the step once more.
                        overflow_retried = True
                        if await self._compact_after_overflow(request, exc):
                            steps -= 1
                            continue
                    self._keep_interrupted(answer)
                    raise
                except BaseException:
                    self._keep_interrupted(answer)
                    raise
                calls = answer.tool_calls()
                if answer.parts:
                    self._append(answer)
                if not calls:
                    await window.before_step(self._learn_window)
                    return self._stopped(stop)
                self._pending = []
                await self._run_calls(calls)
                results, self._pending = self._pending, None
                self._append(Message(role="user", parts=[*results]))
        finally:
            window.cancel()  # the turn failed or was cancelled before the probe answered
            session.usage.turns.append(usage.row(session.provider.model))

    async def _prepare_request(self) -> ModelRequest:
        """This step's request: tools ready, older turns summarised near the window."""
        session = self.session
        # Off this loop: MCP servers a /mode, /cd or /model brought start on theirs.
        await session.prepare_tools()
        request = session.build_request()
        # Near the context window, summarise older turns first (host/compaction.py).
        if await auto_compact(session, request, self._emit):
            request = session.build_request()
        self._emit_notes()
        return request

    async def _stream_reply(self, request: ModelRequest, answer: Message, usage: _TurnUsage) -> str:
        """Stream one reply into ``answer`` (what arrived stays there if this raises);
        the model's stop reason."""
        stop = "end_turn"
        # The reasoning part still receiving streamed pieces (closed by its item).
        thinking: ReasoningPart | None = None
        async for item in self.session.provider.stream(request):
            match item:
                case ReasoningChunk():
                    thinking = self._take_reasoning(answer, thinking, item)
                case ReasoningItem():
                    self._close_reasoning(answer, thinking, item)
                    thinking = None
                case TextChunk():
                    if item.text:
                        thinking = None  # answer text ends the reasoning before it
                        self._take_text(answer, item)
                case ToolCallChunk():
                    thinking = None
                    answer.parts.append(_call_part(item))
                case UsageChunk():
                    usage.add(item)
                    self.session.usage.add(item.input_tokens, item.output_tokens, model=request.model,
                                           reasoning_tokens=item.reasoning_tokens)
                    self._emit(UsageEvent(input_tokens=item.input_tokens, output_tokens=item.output_tokens,
                                          reasoning_tokens=item.reasoning_tokens or None))
                case Finished():
                    stop = item.stop_reason
                case _:
                    assert_never(item)
        return stop

    def _take_reasoning(self, answer: Message, thinking: ReasoningPart | None,
                        item: ReasoningChunk) -> ReasoningPart | None:
        """A streamed piece of reasoning, into the open reasoning part (opened if none)."""
        if not item.text:
            return thinking
        if thinking is None:
            thinking = ReasoningPart(provider=self.session.provider.name)
            answer.parts.append(thinking)
        thought = clean_text(item.text)
        thinking.text += thought
        self._emit(ReasoningDelta(text=thought))
        return thinking

    def _take_text(self, answer: Message, item: TextChunk) -> None:
        """A streamed piece of the answer's text, onto its last text part."""
        delta = clean_text(item.text)
        if answer.parts and isinstance(answer.parts[-1], TextPart):
            answer.parts[-1].text += delta
        else:
            answer.parts.append(TextPart(text=delta))
        self._emit(TextDelta(text=delta))

    def _keep_interrupted(self, answer: Message) -> None:
        """A reply that broke off: keep its text, marked as interrupted; unfinished calls
        are dropped."""
        answer.parts = [p for p in answer.parts if isinstance(p, TextPart)]
        if answer.parts:
            answer.interrupted = True
            self._append(answer)

    async def _learn_window(self, asking: Awaitable[str | None]) -> None:
        """Wait for the context-window probe; a Note says what it learned."""
        said = await asking
        if said:
            self._emit(Note(text=said))

    def _stopped(self, stop: str) -> StopReason:
        """The turn's stop reason for the model's own (each protocol names them its way);
        one it does not know ends the turn normally, and a note names it."""
        if stop in _MODEL_STOPS:
            return _MODEL_STOPS[stop]
        self._emit(Note(text=f"The model stopped for a reason Crystal does not know: {stop[:80]}."))
        return "end_turn"

    def _progress_for(self, call: ToolCallPart) -> Any:
        """A progress reporter for one call, safe to call from another thread."""
        loop = asyncio.get_running_loop()

        def report(progress: float, total: float | None = None, message: str | None = None) -> None:
            event = ToolProgress(id=call.id, name=call.name, progress=progress, total=total,
                                 message=(message or None) and message[:300])
            loop.call_soon_threadsafe(self._emit, event)

        return report

    def _parallel_safe(self, call: ToolCallPart) -> bool:
        """A call that only reads and that the host allows without anyone: it may run
        beside its neighbours. Anything that could ask, write, be refused or wait for a
        job runs alone."""
        session = self.session
        tool = session.tool(call.name)
        if tool is None or call.raw_arguments is not None or tool.classify_reads_files:
            return False  # a classification that reads files is not made on the loop (ROBUST-3)
        try:
            args = tool.parse(call.arguments)
            if tool.waits(args):
                return False  # what comes after may depend on what it waits for
            classification = tool.classify(args, session.tool_context(
                self.interaction, call_id=call.id, images_ok=session.capabilities.images))
        except Exception:
            return False
        return (is_plain_read(classification) and host_outcome(session.approval, classification) == "allow"
                and forbidden_match(session.config.forbidden, call.name, call.arguments, session.workspace) is None)

    async def _run_calls(self, calls: list[ToolCallPart]) -> None:
        """Run one reply's calls into ``self._pending``, in call order. Neighbouring
        read-only calls the host allows run concurrently; the others one at a time."""
        assert self._pending is not None
        pending = self._pending
        index = 0
        try:
            while index < len(calls):
                end = index + 1
                if self._parallel_safe(calls[index]):
                    while end < len(calls) and self._parallel_safe(calls[end]):
                        end += 1
                batch = calls[index:end]
                if len(batch) == 1:
                    pending.append(await self._run_call(batch[0]))
                else:
                    finished: dict[str, ToolResultPart] = {}

                    async def one(call: ToolCallPart, into: dict[str, ToolResultPart] = finished) -> None:
                        into[call.id] = await self._run_call(call)

                    try:
                        await asyncio.gather(*(one(c) for c in batch))
                    finally:  # on a cancel too: keep what finished
                        pending.extend(finished[c.id] for c in batch if c.id in finished)
                index = end
        finally:
            order = {c.id: n for n, c in enumerate(calls)}
            pending.sort(key=lambda p: order.get(p.call_id, len(order)))

    async def _run_call(self, call: ToolCallPart) -> ToolResultPart:
        session = self.session
        self._emit(ToolCallStarted(id=call.id, name=call.name, arguments=call.arguments))
        tool = session.tool(call.name)
        if tool is None:
            available = ", ".join(t.name for t in session.catalog)
            return self._result(call, ToolResult.fail(f"Unknown tool '{call.name}'. Available tools: {available}."))
        if call.raw_arguments is not None:
            return self._result(
                call, ToolResult.fail(f"The arguments for {call.name} were not a valid JSON object (nested at most "
                                      f"{MAX_ARGUMENT_DEPTH} levels): {call.raw_arguments[:200]}")
            )
        try:
            args = tool.parse(call.arguments)
        except ToolError as exc:
            return self._result(call, ToolResult.fail(str(exc)))
        ctx = session.tool_context(self.interaction, call_id=call.id, images_ok=session.capabilities.images,
                                   progress=self._progress_for(call))
        try:
            if tool.classify_reads_files:  # ROBUST-3: off the loop (Tool.classify_reads_files)
                classification = await asyncio.to_thread(tool.classify, args, ctx)
            else:
                classification = tool.classify(args, ctx)
        except ToolError as exc:
            return self._result(call, ToolResult.fail(str(exc)))
        except Exception as exc:  # a bug in one tool must not end the turn
            session.note(f"Tool {call.name} failed to classify its call: {type(exc).__name__}: {exc}")
            return self._result(call, ToolResult.fail(f"Internal error in {call.name}: {type(exc).__name__}: {exc}"))
        if tool.sandboxed and sandbox_state(session.config) == "missing":
            # SANDBOX-1: nothing would confine what this call starts; say so once, and
            # a person decides it in every approval mode.
            session.note(MISSING_NOTE, once=True)
            classification = dataclasses.replace(classification, unconfined=True)
        if tool.runs_unsandboxed and session.config.sandbox != "off":
            # SANDBOX-1: the tool runs the model's code where no sandbox reaches (the
            # python tool, in the kernel): approved as an unsandboxed command, asked in
            # every mode. "sandbox": "off" is the person's choice to run commands
            # unconfined, and then the table applies as it does to bash.
            classification = dataclasses.replace(classification, unsandboxed=tool.runs_unsandboxed)
        decision = await decide(session, self.interaction, call, classification, self._emit)
        if not decision.allowed:
            return self._result(call, ToolResult.fail(decision.message_for_model()), "denied")
        try:
            result = await tool.run(args, ctx)
        except ToolError as exc:
            result = ToolResult.fail(str(exc))
        except asyncio.CancelledError:
            if self._pending is not None:
                self._pending.append(self._result(call, ToolResult.fail("Cancelled by the person."), "cancelled"))
            raise
        except Exception as exc:
            session.note(f"Tool {call.name} failed with an internal error: {type(exc).__name__}: {exc}")
            result = ToolResult.fail(f"Internal error in {call.name}: {type(exc).__name__}: {exc}")
        if result.images and not ctx.images_ok:
            result = ToolResult.fail(NO_IMAGES)
        result.text = truncate_output(result.text, session.config.tool_output_limit)
        return self._result(call, result)

    async def _compact_after_overflow(self, request: Any, exc: ProviderError) -> bool:
        """The server refused the request as too long: its window is smaller than we
        assumed. Adopt the size it names (else a bit under what it refused), compact to
        fit that, and say so; True when the conversation was compacted."""
        provider = self.session.provider
        stated = _STATED_WINDOW.search(str(exc))
        window = int(stated.group(1)) if stated else int(estimate_tokens(request) * 0.8)
        if 0 < window < provider.capabilities.context_window:
            try:
                provider.capabilities = dataclasses.replace(provider.capabilities, context_window=window)
            except (AttributeError, TypeError):
                pass  # a provider whose capabilities are fixed: compaction uses the old size
            configured = self.session.config.context_window
            if configured and int(configured) > window:
                self.session.config.context_window = window  # the server's word beats the setting
        self._emit(Note(text="The model server refused the request as too long for its context window "
                             f"(now taken as {provider.capabilities.context_window:,} tokens); compacting the "
                             "conversation and trying once more."))
        try:
            result = await compact(self.session)
        except NothingToCompact:
            self._emit(Note(text="Nothing older is left to summarise."))
            return False
        except (SideCallError, ProviderError) as failure:
            self._emit(Note(text=f"Compaction failed ({failure}); the conversation was kept as it was."))
            return False
        self._emit(result.event())
        return True

    def _close_reasoning(self, answer: Message, open_part: ReasoningPart | None,
                         item: ReasoningItem) -> None:
        """A finished reasoning block: complete the part its pieces streamed into, or add
        one (redacted thinking, or a server that sent the block whole)."""
        part = open_part
        if part is None:
            part = ReasoningPart(provider=item.provider)
            answer.parts.append(part)
        if item.text and not part.text:
            part.text = item.text
            self._emit(ReasoningDelta(text=item.text))
        part.provider = item.provider
        part.signature, part.encrypted, part.item_id, part.redacted = (
            item.signature, item.encrypted, item.id, item.redacted)
        return None

    def _result(self, call: ToolCallPart, result: ToolResult, status: ToolStatus | None = None) -> ToolResultPart:
        # File names that are not UTF-8 reach tools as surrogate escapes; the model, the
        # fronts and the session document get them as visible \xNN text (ROBUST-1).
        # The host's own secrets (the Home's signing key) never reach the model, a front
        # or the session file, whatever a tool printed (TRUST-7, core/secrets.py).
        hidden = host_secret_values()
        result.text = redact_text(clean_text(result.text), hidden)
        # Fronts show the person's view of the result, the model gets its own (they
        # differ only for content annotated for one audience, ToolResult.shown_text).
        shown = result.text if result.shown_text is None else redact_text(clean_text(result.shown_text), hidden)
        shown_images = result.images if result.shown_images is None else result.shown_images
        self._emit(ToolResultEvent(id=call.id, name=call.name, ok=result.ok, text=shown,
                                   status=status or ("ok" if result.ok else "failed"),
                                   images=list(shown_images), display=result.display,
                                   file_change=result.file_change))
        if self.session.todos != self._todos_seen:
            # A call (todowrite, or any tool given the list) changed the plan: fronts
            # that show it get the whole new list, once per change.
            self._todos_seen = [t.model_copy() for t in self.session.todos]
            self._emit(TodosUpdated(todos=[t.model_copy() for t in self._todos_seen]))
        return ToolResultPart(call_id=call.id, name=call.name, ok=result.ok, text=result.text,
                              images=list(result.images))


def _call_part(chunk: ToolCallChunk) -> ToolCallPart:
    """The model's call as a transcript part. Arguments that are not a JSON object, or
    nest deeper than MAX_ARGUMENT_DEPTH, stay raw text and the call fails with a result
    the model reads; strings are cleaned so the session can always be saved."""
    name = clean_text(chunk.name)
    text = chunk.arguments.strip() or "{}"
    try:
        arguments = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        arguments = None
    if not isinstance(arguments, dict) or nesting_depth(arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH:
        return ToolCallPart(id=chunk.id, name=name, arguments={}, raw_arguments=clean_text(chunk.arguments))
    return ToolCallPart(id=chunk.id, name=name, arguments=clean_value(arguments))


def run_turn(session: Session, prompt: str | list[Part], interaction: Interaction | None = None) -> Turn:
    """Start a turn; iterate the returned :class:`Turn` for events."""
    return Turn(session, prompt, interaction)
