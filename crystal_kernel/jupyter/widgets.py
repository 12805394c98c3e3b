"""Questions (SPEC Q-1 … Q-5) and approvals as ipywidgets inside the running cell.

:class:`WidgetInteraction` implements the host's Interaction protocol for any IPython
front (the Crystal kernel, the ``%crystal`` magics): it shows a form, then awaits an
asyncio Future that the widget callbacks resolve. On ipykernel >= 7.4 comm messages are
dispatched while a cell runs (DESIGN.md), so awaiting is enough. Once answered, an
approval form leaves nothing once answered: the tool's card states the decision
(``Allowed once: bash …``, render.py) above the result it led to, so a saved notebook
shows what was decided, once; a question form leaves nothing either, since the
question's card shows each question with its answer (every answer is read once).
Interrupted while it waits, a form says so in its own place.

Nobody to answer (nbclient, papermill): a form waits ``timeout`` seconds (config
``personTimeoutSeconds``, default 3600; ``--ask-timeout`` wins); when it passes, a
question counts as dismissed (a failed tool result, Q-5) and an approval as denied, and
the model is told why. While a form waits, the kernel's log (stderr) says what it waits
for, so a headless run that cannot answer is not silent. A kernel with no front end that
can show forms (nbconvert, papermill: front_ends.py) ends the wait within
front_ends.GRACE_SECONDS the same way, and logs why and how to run unattended.
``personTimeoutSeconds: 0`` means nobody answers forms: :func:`live_forms` then gives
None and the host's NoPerson answers at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from crystal_kernel.core.deadline import within
from crystal_kernel.core.interaction import CONFIRM_TITLE, ApprovalRequest, PersonDecision, Question, needs_confirmation
from crystal_kernel.host.recorded_person import prepare_ask
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.approval_form import BOX as _BOX
from crystal_kernel.jupyter.approval_form import MUTED as _MUTED
from crystal_kernel.jupyter.approval_form import ApprovalForm
from crystal_kernel.jupyter.approval_form import form_html as _html
from crystal_kernel.jupyter.cards import Bundle, esc, summarize_arguments
from crystal_kernel.jupyter.front_ends import GRACE_SECONDS, headless_log_line
from crystal_kernel.jupyter.safe_html import html_bundle, inline_markdown_html

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

_LOG = logging.getLogger("crystal_kernel.forms")
# A form's answer: a PersonDecision (approval) or the chosen labels (questions).
T = TypeVar("T")
Answer = TypeVar("Answer", contravariant=True)


class LiveForm(Protocol[Answer]):
    """A form shown while a turn waits for its answer of type ``Answer`` (questions,
    approvals): its widget, whether it is over, and what it leaves behind."""

    widget: Any
    finished: bool

    def summary_bundle(self, answer: Answer | None, note: str = "", /) -> Bundle: ...
_LOG.addHandler(logging.NullHandler())  # without the kernel's log: say nothing, never print into the cell


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    """Resolve ``future`` from a widget callback, whatever thread the callback runs on."""
    if future.done():
        return
    loop = future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        future.set_result(value)
    else:
        loop.call_soon_threadsafe(_resolve_now, future, value)


def _resolve_now(future: asyncio.Future[Any], value: Any) -> None:
    """On the future's own loop: it may have been settled since the callback was queued."""
    if not future.done():
        future.set_result(value)


def _bundle_of(widget: Any) -> Bundle:
    bundle: Bundle = widget._repr_mimebundle_()
    return bundle


class QuestionForm:
    """The question tool's form. ``on_done(answers)`` gets the labels per question in
    order (custom text counts as a label, Q-4) or None when dismissed (Q-5)."""

    def __init__(self, questions: list[Question], on_done: Callable[[list[list[str]] | None], None]):
        import ipywidgets as w

        self._w = w
        self.questions = questions
        self.on_done = on_done
        # one single-select question submits on the click; anything else confirms.
        self.immediate = not needs_confirmation(questions)
        self.choice: list[str | None] = [None] * len(questions)
        self.option_buttons: list[list[Any]] = []
        self.checkboxes: list[list[Any]] = []
        self.custom: list[Any | None] = []
        self.finished = False
        self.message = w.HTML("")  # only ever set to escaped text below
        self.step1 = self._build_questions()
        self.widget = w.VBox([self.step1], layout=w.Layout(border="1px solid #d0d7de", padding="4px 8px"))
        self.widget.add_class("crystal-form")  # the lab extension keeps focus off the running cell
        self.widget.add_class("crystal-widget")  # and colours its buttons to read (contrast)

    # ----- building ------------------------------------------------------------------------
    def _build_questions(self) -> Any:
        w = self._w
        rows: list[Any] = []
        for qi, q in enumerate(self.questions):
            rows.append(_html(w, f"<b>{esc(q.header)}</b><br>{inline_markdown_html(q.question)}"))
            buttons: list[Any] = []
            boxes: list[Any] = []
            for opt in q.options:
                note = _html(w, f'<span style="{_MUTED}">{inline_markdown_html(opt.description)}</span>')
                if q.multiple:
                    box = w.Checkbox(value=False, description=opt.label, indent=False,
                                     layout=w.Layout(width="auto"))
                    boxes.append(box)
                    rows.append(w.HBox([box, note]))
                else:
                    button = w.Button(description=opt.label, tooltip=opt.description or opt.label,
                                      layout=w.Layout(width="auto"))
                    button.on_click(lambda _b, qi=qi, label=opt.label: self._choose(qi, label))
                    buttons.append(button)
                    rows.append(w.HBox([button, note]))
            text = None
            if q.custom:
                text = w.Text(value="", placeholder="Or type your own answer",
                              continuous_update=not self.immediate, layout=w.Layout(width="60%"))
                text.observe(lambda change, qi=qi: self._typed(qi, change["new"]), names="value")
                rows.append(text)
            self.option_buttons.append(buttons)
            self.checkboxes.append(boxes)
            self.custom.append(text)
        actions = []
        if not self.immediate:
            next_button = w.Button(description="Next", button_style="primary", tooltip="Review the answers")
            next_button.on_click(lambda _b: self._to_confirm())
            actions.append(next_button)
        dismiss = w.Button(description="Dismiss", tooltip="Do not answer; the agent goes on without answers")
        dismiss.on_click(lambda _b: self._finish(None))
        actions.append(dismiss)
        rows += [self.message, w.HBox(actions)]
        return w.VBox(rows)

    def _build_confirm(self) -> Any:
        w = self._w
        summary = _html(w, self.summary_html(self.answers(), title=CONFIRM_TITLE))
        submit = w.Button(description="Submit", button_style="primary")
        submit.on_click(lambda _b: self._finish(self.answers()))
        back = w.Button(description="Back")
        back.on_click(lambda _b: self._back())
        dismiss = w.Button(description="Dismiss")
        dismiss.on_click(lambda _b: self._finish(None))
        return w.VBox([summary, w.HBox([submit, back, dismiss])])

    # ----- callbacks ----------------------------------------------------------------------------
    def _choose(self, qi: int, label: str) -> None:
        if self.finished:
            return
        self.choice[qi] = label
        for b in self.option_buttons[qi]:
            b.button_style = "info" if b.description == label else ""
        text = self.custom[qi]
        if text is not None and text.value:
            text.value = ""  # an option replaces typed text
        if self.immediate:
            self._finish([[label]])

    def _typed(self, qi: int, value: str) -> None:
        if self.finished or not value.strip():
            return
        if not self.questions[qi].multiple:
            self.choice[qi] = None
            for b in self.option_buttons[qi]:
                b.button_style = ""
        if self.immediate:
            self._finish([[value.strip()]])

    def _to_confirm(self) -> None:
        missing = [q.header for qi, q in enumerate(self.questions)
                   if not q.multiple and not self.answers()[qi]]
        if missing:
            self.message.value = (f'<span style="color:{palette.ERROR}">Choose an answer for: '
                                  f'{esc(", ".join(missing))}</span>')
            return
        self.message.value = ""
        self.widget.children = [self._build_confirm()]

    def _back(self) -> None:
        old = self.widget.children
        self.widget.children = [self.step1]
        for child in old:  # the confirmation step is rebuilt on Next; free its comms
            if child is not self.step1:
                _close_tree(child)

    def _finish(self, answers: list[list[str]] | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.on_done(answers)

    # ----- answers ------------------------------------------------------------------------------
    def answers(self) -> list[list[str]]:
        out: list[list[str]] = []
        for qi, q in enumerate(self.questions):
            text = self.custom[qi]
            typed = text.value.strip() if text is not None else ""
            if q.multiple:
                picked = [b.description for b in self.checkboxes[qi] if b.value]
                out.append(picked + ([typed] if typed else []))
            else:
                chosen = self.choice[qi]
                out.append([typed] if typed else ([chosen] if chosen else []))
        return out

    def summary_html(self, answers: list[list[str]] | None, title: str = "Answered") -> str:
        if answers is None:
            return f'<div style="{_BOX}"><b>Questions dismissed.</b></div>'
        rows = "".join(
            f"<tr><td style='padding:2px 8px'><b>{esc(q.header)}</b></td>"
            f"<td style='padding:2px 8px'>{esc(', '.join(a) if a else '(no answer)')}</td></tr>"
            for q, a in zip(self.questions, answers)
        )
        return f'<div style="{_BOX}"><div>{esc(title)}</div><table>{rows}</table></div>'

    def summary_bundle(self, answers: list[list[str]] | None, note: str = "") -> Bundle:
        """What the form leaves behind once it is over: nothing. The question's card
        shows each question with its answer, or the dismissal and why (a failed result),
        so the person reads every answer once (cards.py)."""
        return html_bundle("", "")


class WidgetInteraction:
    """The Interaction of a notebook front with a person at the keyboard.

    ``output`` shows bundles (render.IPythonOutput in a kernel). ``before_ask`` runs
    before a form appears (the kernel flushes the streamed text there). ``timeout``: see
    the module docstring; None waits for as long as the turn runs.
    """

    person_present = True
    # Its forms end by ``timeout`` themselves (personTimeoutSeconds, or --ask-timeout,
    # which wins): the host adds no deadline of its own (host/person_deadline.py).
    enforces_person_timeout = True

    def __init__(self, output: Any = None, *, timeout: float | None = None,
                 before_ask: Callable[[], Awaitable[None] | None] | None = None,
                 log: logging.Logger | None = None, fronts: Any = None):
        if output is None:
            from crystal_kernel.jupyter.render import IPythonOutput

            output = IPythonOutput()
        self.output = output
        self.timeout = timeout
        self.before_ask = before_ask
        # The kernel's own log (the terminal that runs Jupyter), never the cell's stderr.
        self.log = log or _LOG
        # The forms on screen right now (tests and the kernel look at them).
        self.open_forms: list[Any] = []
        # front_ends.FrontEnds of the kernel: a form nobody can see ends quickly. None
        # (no kernel): forms wait for ``timeout``.
        self.fronts = fronts

    async def _wait(self, form: LiveForm[Any], future: asyncio.Future[T], what: str,
                    headless: str) -> tuple[T | None, str]:
        """``headless``: the outcome a headless run's log line names (Dismissed, Denied)."""
        # Live until answered; once its kernel is gone, a saved copy says so instead of
        # "model not found" (live_outputs.py).
        stale = form.summary_bundle(None, "The kernel stopped before anyone answered.")
        handle = self.output.show(_bundle_of(form.widget), stale=stale)
        # A warning only when this may be a headless run (no front end heard yet): a
        # person looking at the form needs no warning in the terminal that it waits.
        maybe_headless = self.fronts is not None and not self.fronts.heard
        self.log.log(logging.WARNING if maybe_headless else logging.INFO, "%s", self._waiting_line(what))
        self.open_forms.append(form)
        value: T | None = None
        note = ""
        try:
            value = await self._answer(future)
        except asyncio.TimeoutError:
            note = f"Nobody answered within {self.timeout:g} seconds (personTimeoutSeconds)."
        except _NoFrontEnd:
            note = ("Nobody can answer: no front end that shows forms is connected to the kernel "
                    "(a headless run such as nbconvert or papermill).")
            self.log.warning(headless_log_line(what, headless))
        except asyncio.CancelledError:
            note = "The turn was interrupted."
            form.finished = True
            handle.update(form.summary_bundle(None, note))
            self._close(form)
            raise
        form.finished = True
        # An approval ends with its decision on the tool's card (render.py), above the
        # result it led to: the form leaves nothing. A question form leaves nothing too.
        handle.update(_LEFT_BEHIND if isinstance(form, ApprovalForm) else form.summary_bundle(value, note))
        self._close(form)
        return value, note

    def _waiting_line(self, what: str) -> str:
        """The kernel log's line when a form starts waiting: what really happens next. A
        kernel that has heard no front end gives one GRACE_SECONDS to show up (a headless
        run then ends the form), and only then the whole personTimeoutSeconds."""
        line = f"Crystal is waiting for a person to answer {what}"
        until = ""
        if self.timeout is not None:
            clock = time.strftime("%H:%M:%S", time.localtime(time.time() + self.timeout))
            until = f" until {clock} (personTimeoutSeconds={self.timeout:g})"
        if self.fronts is not None and not self.fronts.heard:
            grace = GRACE_SECONDS if self.timeout is None else min(GRACE_SECONDS, self.timeout)
            return (f"{line}. No front end that shows forms has been heard from yet: if none shows up within "
                    f"{grace:g} s, the form ends as denied (an approval) or dismissed (questions); otherwise it "
                    f"waits{until or ' for as long as the turn runs'}. For a headless run use --unattended.")
        return f"{line}{until}." if until else f"{line}."

    async def _answer(self, future: asyncio.Future[T]) -> T:
        """The person's answer. Raises TimeoutError after ``timeout``, and _NoFrontEnd
        when no front end was heard within front_ends.GRACE_SECONDS."""
        started = time.monotonic()
        if self.fronts is not None and not self.fronts.heard:
            grace = GRACE_SECONDS if self.timeout is None else min(GRACE_SECONDS, self.timeout)
            there = asyncio.ensure_future(self.fronts.someone_there(grace))
            try:
                await asyncio.wait({future, there}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not there.done():
                    there.cancel()
            if future.done():
                return future.result()
            if not there.result():
                raise _NoFrontEnd
        if self.timeout is None:
            return await future
        return await within(future, max(0.0, self.timeout - (time.monotonic() - started)))

    def _close(self, form: Any) -> None:
        if form in self.open_forms:
            self.open_forms.remove(form)
        try:
            _close_tree(form.widget)
            if getattr(form, "step1", None) is not None:
                _close_tree(form.step1)
        except Exception:
            pass

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        await prepare_ask(self.before_ask)
        future: asyncio.Future[list[list[str]] | None] = asyncio.get_running_loop().create_future()
        form = QuestionForm(questions, lambda answers: _settle(future, answers))
        value, note = await self._wait(form, future, "questions: " + "; ".join(q.header for q in questions),
                                       "Dismissed")
        if value is None and note:
            from crystal_kernel.core.errors import ToolError

            # A failed tool result that says why, so the model does not think the
            # person chose to dismiss.
            raise ToolError(f"{note} The questions were dismissed; go on with a safe default "
                            "or stop and say what you need.")
        return value

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        await prepare_ask(self.before_ask)
        future: asyncio.Future[PersonDecision] = asyncio.get_running_loop().create_future()
        form = ApprovalForm(request, lambda decision: _settle(future, decision))
        answered = await self._wait(form, future, f"an approval for {request.tool} "
                                    f"{summarize_arguments(request.tool, request.arguments)}", "Denied")
        value, note = answered
        if value is None:
            return PersonDecision(outcome="deny", reason=f"{note} The call was not approved.".strip(), nobody=True)
        return value


#: What an answered approval form leaves (its card states the decision): an empty
#: output with MIME types, never a ``display_data`` without any.
_LEFT_BEHIND: Bundle = html_bundle("", "")


class _NoFrontEnd(Exception):
    """No front end that could show a form was heard (front_ends.py)."""


def _close_tree(widget: Any) -> None:
    """Close a widget and its children so their comms are released."""
    for child in getattr(widget, "children", ()) or ():
        _close_tree(child)
    widget.close()


def live_forms(session: Session, output: Any, *, ask_timeout: float | None,
               before_ask: Callable[[], Any] | None, log: logging.Logger | None = None) -> WidgetInteraction | None:
    """The widget forms of one notebook turn, or None when nobody will answer them
    (``personTimeoutSeconds: 0``). ``ask_timeout`` (the ``--ask-timeout`` flag) wins
    over the session's ``personTimeoutSeconds``."""
    timeout = ask_timeout if ask_timeout is not None else getattr(session.config, "person_timeout_seconds", 3600)
    if not timeout:
        return None
    from crystal_kernel.jupyter.front_ends import of_running_kernel

    return WidgetInteraction(output, timeout=timeout, before_ask=before_ask, log=log,
                             fronts=of_running_kernel())
