"""Render a turn's host events into notebook outputs, for any front.

The :class:`Renderer` takes host events (crystal_kernel.core.events) and an
:class:`Output` — something that can show a mime bundle and later update it in place.
The kernel and the ``%crystal`` magics both pass :class:`IPythonOutput`; tests may pass
:class:`RecordingOutput`. The renderer never imports IPython itself.

What a turn shows, in order: a status line (updated with the token count), the answer
as Markdown (one display per text segment, updated in place while it streams: with the
lab extension, as changes to the sanitized HTML of the Markdown so far (stream_html.py),
else at most ``max_rate`` times a second and less often as it grows: :class:`_Stream`), a card per tool call (running,
approval, result), images as image outputs, notes, errors, and a closing line when the
turn was interrupted or failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from typing_extensions import assert_never

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
from crystal_kernel.jupyter.cards import (
    Bundle,
    CardState,
    Status,
    card_bundle,
    error_bundle,
    image_bundle,
    markdown_bundle,
    note_bundle,
    status_bundle,
    summarize_arguments,
    thinking_bundle,
)
from crystal_kernel.jupyter.safe_html import html_answer_bundle, markdown_html
from crystal_kernel.jupyter.stream_html import html_update

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

DEFAULT_MAX_RATE = 15.0  # display updates per second while text streams
#: Bytes a second a streaming display may re-send while it grows (see :class:`_Stream`).
LIVE_BYTES_PER_SECOND = 32 * 1024
#: Live updates a second, at most, when they carry only what changed
#: (:class:`_Stream`): five a second is how often ipykernel flushes printed text. Each
#: update's own envelope (ids, metadata) is ~260 bytes, so once an answer is long an
#: update waits for ``DELTA_MIN_CHARS`` new characters, or at most ``DELTA_MAX_WAIT``
#: seconds (reached at ``DELTA_SLOWDOWN_CHARS`` characters so far): the text never stalls
#: for more than a second and the envelopes stay a small part of the bytes.
DELTA_RATE = 5.0
DELTA_MIN_CHARS = 4096
DELTA_MAX_WAIT = 1.0
DELTA_SLOWDOWN_CHARS = 16 * 1024
#: With deltas each live update renders the whole Markdown so far (stream_html.py): the
#: next one waits at least that rendering's time / ``RENDER_SHARE``, so re-rendering a
#: long answer takes at most a fifth of the kernel's time (100 KB of prose: ~40 ms).
RENDER_SHARE = 0.2


#: Tools whose outputs (images included) already show in the cell while they run: the
#: notebook's ``python`` tool displays through IPython itself, so the renderer does not
#: repeat its images after the card.
SHOWN_LIVE = frozenset({"python"})


class Handle(Protocol):
    def update(self, bundle: Bundle, stale: Bundle | None = None, kept: Bundle | None = None, *,
               final: bool = False) -> None: ...


class Output(Protocol):
    """Where rendered bundles go. ``show`` adds an output and returns its handle;
    ``stale`` is what a live output says once its kernel is gone."""

    def show(self, bundle: Bundle, stale: Bundle | None = None, *, streamed: bool = False) -> Handle: ...


class IPythonOutput:
    """Shows bundles through IPython's display machinery (display_id outputs, updated
    in place with ``update_display_data``)."""

    def show(self, bundle: Bundle, stale: Bundle | None = None, *, streamed: bool = False) -> Handle:
        """``stale``: for a live output (a form, Stop buttons), what it should say once
        its kernel is gone (live_outputs.py: reload and restart). ``streamed``: the
        first piece of a streaming text, whose ``update(final=True)`` carries the whole
        text (live_outputs.LiveDisplay: in a notebook cell it replaces the streamed one in
        place; outside a cell it is the only output sent)."""
        from crystal_kernel.jupyter.live_outputs import LiveDisplay

        return LiveDisplay(bundle, stale, streamed=streamed)

    @property
    def deltas(self) -> bool:
        """Stream answers as changes to their HTML (stream_html.py): a front that renders
        them (the lab extension) has connected to this kernel."""
        from crystal_kernel.jupyter.live_outputs import stream_deltas

        return stream_deltas()


class RecordingOutput:
    """An in-memory Output: ``outputs[i]`` is the latest bundle of the i-th display and
    ``updates`` counts updates per display; ``sent`` is every bundle shown or updated, in
    order, and ``kept`` the bundle each update keeps for a reloaded page (for tests and
    headless use)."""

    def __init__(self, deltas: bool = False) -> None:
        self.outputs: list[Bundle] = []
        self.updates: list[int] = []
        self.sent: list[Bundle] = []
        self.kept: list[Bundle | None] = []
        self.deltas = deltas

    def show(self, bundle: Bundle, stale: Bundle | None = None, *, streamed: bool = False) -> Handle:
        index = len(self.outputs)
        self.outputs.append(dict(bundle))
        self.sent.append(dict(bundle))
        self.updates.append(0)
        outer = self

        class _H:
            def update(self, bundle: Bundle, stale: Bundle | None = None, kept: Bundle | None = None, *,
                       final: bool = False) -> None:
                outer.outputs[index] = dict(bundle)
                outer.sent.append(dict(bundle))
                outer.kept.append(kept)
                outer.updates[index] += 1

        return _H()


def status_of(session: Session) -> Status:
    """The status line of a session: mode, approval, provider:model, prompt set, tokens."""
    label = "default"
    try:
        from crystal_kernel.prompts.selection import resolve_selection

        label = resolve_selection(session.home, session.workspace, session.flags).set_label
    except Exception:
        label = getattr(session.flags, "prompt_set", None) or "default"
    provider = session.provider
    return Status(mode=session.mode, approval=session.approval, provider=getattr(provider, "name", "?"),
                  model=getattr(provider, "model", "?"), prompt_set=label, tokens=session.usage.total)


class _Joined:
    """Text that grows by small pieces, joined only when read: ``text += piece`` on an
    attribute copies the whole text each time (20,000 deltas of a long answer: seconds)."""

    def __init__(self) -> None:
        self._done = ""
        self._pieces: list[str] = []

    def add(self, piece: str) -> None:
        self._pieces.append(piece)

    def value(self) -> str:
        if self._pieces:
            self._done += "".join(self._pieces)
            self._pieces.clear()
        return self._done


class _Stream:
    """One Markdown display updated in place while its text streams.

    ``bundle`` renders the text so far (the answer's Markdown, or the Thinking card).
    Jupyter's display updates replace the whole output, so an update that re-sends the
    text so far grows with the answer. Two ways keep the bytes from growing with its
    square:

    - ``deltas`` (a front that renders them is connected: the lab extension): each live
      update carries only how the sanitized HTML of the Markdown so far changed since the
      last one (``STREAM_MIME``, stream_html.py), at most ``DELTA_RATE`` times a second
      and, for a long answer, when ``DELTA_MIN_CHARS`` are new or a second has passed;
      the extension shows that HTML as JupyterLab shows the final one, so the answer is
      rendered while it streams and the end changes nothing else (TRUST-1: the HTML is
      the kernel's sanitizer's output). A page reloaded mid-stream gets the whole HTML
      so far once (``kept``: live_outputs.py).
    - otherwise updates come at most ``max_rate`` times a second, and the rate falls as
      the answer grows: after an update of N bytes the next waits at least
      N / ``LIVE_BYTES_PER_SECOND`` seconds (a 10 KB answer updates ~3 times a second,
      a 100 KB one every ~3 s); a live update carries only the rendered ``text/html``.

    Either way :meth:`finish` sends the whole bundle once (the final update, which the
    output keeps; outside a notebook cell it is the only thing sent, so a client that
    ignores display updates keeps the whole text: live_outputs.LiveDisplay), so the
    final output is exactly the HTML ``bundle`` renders (sanitized as always, TRUST-1);
    with deltas, an answer's ``text/plain`` is then only a preview (``html_answer_bundle``).
    """

    def __init__(self, output: Output, max_rate: float, clock: Callable[[], float],
                 bundle: Callable[[str], Bundle] = markdown_bundle, deltas: bool = False):
        self.output = output
        self.bundle = bundle
        self.deltas = deltas
        self.interval = 1.0 / max_rate if max_rate > 0 else 0.0
        if deltas and max_rate > 0:
            self.interval = max(self.interval, 1.0 / DELTA_RATE)
        self.clock = clock
        self._text = _Joined()
        self.length = 0  # characters so far (without joining them)
        self.handle: Handle | None = None
        self.shown = ""
        self.html = ""  # with deltas: the HTML the page has (stream_html.py)
        self.render_cost = 0.0  # seconds the last rendering of the text so far took
        self.last = 0.0
        self.wait = self.interval  # before the next live update (falls as the text grows)
        self.partial = False  # the display holds a live (html-only) update
        self.timer: asyncio.TimerHandle | None = None
        self.updates = 0

    @property
    def text(self) -> str:
        """The text so far."""
        return self._text.value()

    def add(self, delta: str) -> None:
        self._text.add(delta)
        self.length += len(delta)
        now = self.clock()
        if self.handle is None:
            self.handle = self.output.show(self._html_update() if self.deltas else self.bundle(self.text),
                                           streamed=True)
            self.shown, self.last = self.text, now
            self.partial = self.deltas
            return
        least = max(self.interval, self.render_cost / RENDER_SHARE)
        wait = max(self._delta_wait(), least) if self.deltas else self.wait
        elapsed = now - self.last
        if elapsed >= wait or (self.deltas and elapsed >= least
                               and self.length - len(self.shown) >= DELTA_MIN_CHARS):
            self.flush()
        elif self.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop: the next delta or finish() flushes
            self.timer = loop.call_later(wait - elapsed, self.flush)

    def _delta_wait(self) -> float:
        """The longest a delta update waits for ``DELTA_MIN_CHARS``: ``interval`` for a
        short answer, up to ``DELTA_MAX_WAIT`` as it grows (each update's envelope is
        then a small part of what it carries)."""
        return min(DELTA_MAX_WAIT, max(self.interval, self.length / DELTA_SLOWDOWN_CHARS))

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _html_update(self) -> Bundle:
        """The update that brings the page from ``self.html`` to the text so far's HTML."""
        started = time.perf_counter()
        html = markdown_html(self.text)
        self.render_cost = time.perf_counter() - started
        update = html_update(self.html, html)
        self.html, self.shown = html, self.text
        return update

    def flush(self) -> None:
        """A live update: how the HTML changed (``deltas``), else the text so far as the
        rendered HTML only."""
        self._cancel()
        if self.handle is not None and self.deltas:
            if self.length > len(self.shown):
                self.handle.update(self._html_update(), kept=html_update("", self.html))
                self.last = self.clock()
                self.updates += 1
            return
        if self.handle is not None and self.text != self.shown:
            live = live_bundle(self.bundle(self.text))
            self.handle.update(live)
            self.shown, self.last = self.text, self.clock()
            self.partial = self.partial or "text/plain" not in live
            size = sum(len(str(v)) for v in live.values())
            self.wait = max(self.interval, size / LIVE_BYTES_PER_SECOND)
            self.updates += 1

    def finish(self, final: Bundle | None = None) -> None:
        """The text is complete: show its whole bundle (or ``final``) once."""
        self._cancel()
        if self.handle is None:
            return
        if final is None and self.deltas and self.bundle is markdown_bundle:
            final = html_answer_bundle(self.text)  # the answer once, as HTML
        # Always, also when nothing changed: outside a notebook cell nothing was sent yet,
        # and this is the output (live_outputs.LiveDisplay).
        self.handle.update(final if final is not None else self.bundle(self.text), final=True)
        self.shown, self.partial = self.text, False
        self.updates += 1


def live_bundle(bundle: Bundle) -> Bundle:
    """What a live update of ``bundle`` sends: its ``text/html`` when it has one (what a
    notebook shows; the ``text/plain`` copy would double the bytes), else all of it."""
    if "text/html" in bundle:
        return {"text/html": bundle["text/html"]}
    return bundle


class Renderer:
    """Turns host events into outputs. Call :meth:`start` once, :meth:`handle` per event
    and :meth:`close` at the end (close is idempotent).

    ``cell_reports_errors``: the front reports a failed turn as the cell's own error output
    (``CrystalError: …``, which batch runners such as papermill read), so the renderer
    only collects the error in :attr:`errors` instead of showing it a second time."""

    def __init__(self, output: Output, *, max_rate: float = DEFAULT_MAX_RATE,
                 clock: Callable[[], float] = time.monotonic, show_status: bool = True,
                 cell_reports_errors: bool = False):
        self.output = output
        self.cell_reports_errors = cell_reports_errors
        self.max_rate = max_rate
        self.clock = clock
        self.show_status = show_status
        self._status: Status | None = None
        self._status_handle: Handle | None = None
        self._stream: _Stream | None = None
        self._thinking: _Stream | None = None
        self._reasoning = _Joined()
        self._cards: dict[str, tuple[CardState, Handle]] = {}
        # Calls a form asked the person about: that form's summary (right under the card)
        # states the person's decision, so the card does not say it again.
        self._asked: set[str] = set()
        self.stop_reason: str | None = None
        self.errors: list[str] = []
        self._answer = _Joined()
        # Host notes another view of this cell already says (a Trust card): not repeated.
        self.covered_notes: set[str] = set()

    @property
    def text(self) -> str:
        """The whole answer so far, for fronts that return it."""
        return self._answer.value()

    @property
    def reasoning(self) -> str:
        """All reasoning shown, for tests and fronts."""
        return self._reasoning.value()

    # ----- lifecycle ------------------------------------------------------------------
    def start(self, status: Status | None) -> None:
        self._status = status
        if status is not None and self.show_status:
            self._status_handle = self.output.show(status_bundle(status))

    def close(self) -> None:
        self._end_thinking()
        self._end_stream()

    # ----- events -----------------------------------------------------------------------
    def render(self, event: Event) -> None:
        """Draw one event of the turn. Every member of :data:`Event` has its case (the
        kernel's cells and the magics draw through here); a new event fails type checking
        at ``assert_never`` until it has one."""
        # Answer text ends the reasoning shown before it; anything else ends both streams.
        if not isinstance(event, TextDelta):
            self._end_stream()
        if not isinstance(event, ReasoningDelta):
            self._end_thinking()
        match event:
            case TurnStarted():
                pass  # the status line (start) already names the session's model
            case ReasoningDelta():
                if self._thinking is None:
                    self._thinking = _Stream(self.output, self.max_rate, self.clock, thinking_bundle)
                self._thinking.add(event.text)
                self._reasoning.add(event.text)
            case TextDelta():
                if self._stream is None:
                    self._stream = _Stream(self.output, self.max_rate, self.clock,
                                           deltas=bool(getattr(self.output, "deltas", False)))
                self._stream.add(event.text)
                self._answer.add(event.text)
            case ToolCallStarted():
                card = CardState(id=event.id, name=event.name, arguments=dict(event.arguments))
                self._cards[event.id] = (card, self.output.show(card_bundle(card), stale=_stale_card(card)))
            case ApprovalEvent():
                self._approval(event)
            case ToolProgress():
                entry = self._cards.get(event.id)
                if entry is not None:
                    entry[0].progress = event.line()
                    self._update_card(*entry)
            case ToolResultEvent():
                self._result(event)
            case TodosUpdated():
                pass  # the todowrite card shows the new list as its result; /todos lists it
            case Compacted():
                self.output.show(note_bundle(event.line()))
            case UsageEvent():
                self._tokens(event.input_tokens + event.output_tokens)
            case Note():
                if event.text not in self.covered_notes:
                    self.output.show(note_bundle(event.text))
            case ErrorEvent():
                self.errors.append(event.message)
                if not self.cell_reports_errors:
                    self.output.show(error_bundle(event.message))
            case TurnEnd():
                self.stop_reason = event.stop_reason
                if event.stop_reason == "cancelled":
                    self.output.show(note_bundle("Interrupted. The partial answer is kept; the next cell continues."))
                # max_steps: the loop already said so in a note
            case _:
                assert_never(event)

    def show_note(self, text: str) -> None:
        self._end_stream()
        self.output.show(note_bundle(text))

    # ----- pieces -------------------------------------------------------------------------
    def _end_thinking(self) -> None:
        """The reasoning is over: show all of it, folded away under "Thinking"."""
        if self._thinking is not None:
            stream, self._thinking = self._thinking, None
            stream.finish(thinking_bundle(stream.text, done=True))

    def _end_stream(self) -> None:
        if self._stream is not None:
            self._stream.finish()
            self._stream = None

    def _update_card(self, card: CardState, handle: Handle) -> None:
        handle.update(card_bundle(card), stale=_stale_card(card))

    def _approval(self, event: ApprovalEvent) -> None:
        entry = self._cards.get(event.id)
        if entry is None:
            return
        card, handle = entry
        if event.outcome == "allow" and event.by == "host" and not event.verdict and card.state == "running":
            return  # the mode allowed it: nothing new to show
        who = {"host": "the approval mode", "reviewer": "the reviewer", "person": "you",
               "policy": "a forbidden rule"}.get(event.by, event.by)
        reason = event.reason
        if event.by == "person" and reason and reason.startswith("answered from the recording"):
            who = "the recording"
            reason = reason.partition("; ")[2] or None
        # A form was shown (a person, or a recording, answered it; or the host denied
        # because nobody did: approval_flow.NOBODY_ANSWERED): the form leaves nothing
        # (widgets.py) and the card states the decision, above the result it led to.
        shown_by_form = event.by in ("person", "host") and event.id in self._asked
        if shown_by_form and event.outcome != "ask":
            card.state = "denied" if event.outcome == "deny" else "running"
            card.approval = _form_decision(card, event)
            self._update_card(card, handle)
            return
        if event.verdict and reason and reason == event.verdict.rationale:
            reason = None  # the verdict line below gives it
        if event.outcome == "ask":
            card.state = "waiting"
            card.approval = None
            self._asked.add(event.id)
        elif event.outcome == "deny":
            card.state = "denied"
            card.approval = f"Denied by {who}" + (f": {reason}" if reason else ".")
        else:
            card.state = "running"
            if event.by != "host":
                card.approval = f"Allowed by {who}" + (f" ({reason})" if reason else ".")
        if event.verdict and event.outcome != "ask":
            # A verdict that went to the person is shown by the form and its summary.
            line = event.verdict.line()
            card.approval = (card.approval + "\n" if card.approval else "") + line
        self._update_card(card, handle)

    def _result(self, event: ToolResultEvent) -> None:
        entry = self._cards.get(event.id)
        if entry is None:
            card = CardState(id=event.id, name=event.name, arguments={})
            entry = (card, self.output.show(card_bundle(card)))
            self._cards[event.id] = entry
        card, handle = entry
        if card.state != "denied":
            card.state = {"ok": "done", "cancelled": "cancelled", "denied": "denied"}.get(event.status, "failed")
        card.result = event.text
        card.display = event.display
        card.images = len(event.images)
        self._update_card(card, handle)
        if event.name in SHOWN_LIVE:
            return  # its images are in the cell already, shown while it ran
        for image in event.images:
            self.output.show(image_bundle(image.mime_type, image.data, f"[{event.name} image]"))

    def _tokens(self, added: int) -> None:
        if self._status is None or self._status_handle is None:
            return
        s = self._status
        self._status = Status(s.mode, s.approval, s.provider, s.model, s.prompt_set, s.tokens + added)
        self._status_handle.update(status_bundle(self._status))


#: How a form's decision reads on its card (approval_form.py's words).
_FORM_OUTCOME = {"allow_once": "Allowed once", "allow_session": "Allowed for this session", "deny": "Denied"}
#: How the host marks an approval answered from a cassette (host/recorded_person.py).
_FROM_RECORDING = "answered from the recording"


def _form_decision(card: CardState, event: ApprovalEvent) -> str:
    """The line a card shows for what its approval form decided: ``Allowed once: bash
    echo hi``, ``Denied: bash rm x (reason: not now)``, or why there was no decision
    (nobody answered), with the reviewer's verdict when one went to the person."""
    from crystal_kernel.host.approval_flow import NOBODY_ANSWERED

    what = f"{card.name} {summarize_arguments(card.name, card.arguments)}".strip()
    parts = [p for p in (event.reason or "").split("; ") if p]
    recorded = _FROM_RECORDING in parts
    parts = [p for p in parts if p != _FROM_RECORDING]
    if event.by == "host":
        why = (event.reason or "").removeprefix(NOBODY_ANSWERED).strip()
        line = f"Approval for {what}: no decision." + (f" {why}" if why else "")
    elif event.outcome == "deny":
        line = f"Denied: {what}" + (f" (reason: {'; '.join(parts)})" if parts else "")
    else:
        outcome = "allow_session" if "allowed for this session" in parts else "allow_once"
        line = f"{_FORM_OUTCOME[outcome]}: {what}"
    if recorded:
        line += f" ({_FROM_RECORDING})"
    if event.verdict is not None:
        line += "\n" + event.verdict.line(suggests=True)
    return line


def _stale_card(card: CardState) -> Bundle | None:
    """What a running or waiting card, saved and reopened after its kernel stopped,
    should say instead (live_outputs.py); None once the call has ended."""
    from dataclasses import replace

    if card.state not in ("running", "waiting"):
        return None
    why = ("The kernel stopped before anyone approved this call; it did not run." if card.state == "waiting"
           else "The kernel stopped before this call finished.")
    return card_bundle(replace(card, state="cancelled", result=why, approval=None))
