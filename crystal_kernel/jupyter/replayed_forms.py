"""What a notebook shows when a replayed cassette answers for the person.

Under the replay provider with nobody at the keyboard (``--unattended``), the host's
:class:`~crystal_kernel.host.recorded_person.ReplayedPerson` answers question forms and
approvals from the cassette. The cell then shows the same static summary a person's
answer leaves behind, marked as coming from the recording, so a saved notebook reads
the same as one a person ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import BORDER, TEXT, Bundle, esc, summarize_arguments
from crystal_kernel.jupyter.safe_html import NO_MATH, html_bundle

if TYPE_CHECKING:
    from crystal_kernel.core.interaction import Interaction
    from crystal_kernel.host.session import Session

_BOX = (f"border:1px solid {BORDER};border-radius:4px;padding:4px 8px;margin:4px 0;color:{TEXT};"
        "border-left:4px solid {}")
_MUTED = f"color:{palette.MUTED}"
_OUTCOME = {"allow_once": "Allowed once", "allow_session": "Allowed for this session", "deny": "Denied"}
SOURCE = "answered from the recording"


def questions_bundle(questions: list[Any], answers: list[list[str]] | None) -> Bundle:
    """The line a replayed question form leaves: who answered, not the answers, which
    the question's card shows (each answer is read once)."""
    plain = f"Questions {'dismissed' if answers is None else 'answered'} from the recording."
    colour = "#cf222e" if answers is None else "#0969da"
    return html_bundle(plain, f'<div class="{NO_MATH}" style="{_BOX.format(colour)}">'
                              f'<span style="{_MUTED}">{esc(plain)}</span></div>')


def approval_bundle(request: Any, decision: Any) -> Bundle:
    """The summary of a replayed approval."""
    what = f"{request.tool} {summarize_arguments(request.tool, request.arguments)}".strip()
    plain = f"{_OUTCOME.get(decision.outcome, decision.outcome)}: {what}"
    if decision.reason:
        plain += f" (reason: {decision.reason})"
    colour = "#cf222e" if decision.outcome == "deny" else "#1a7f37"
    html = (f'<div class="{NO_MATH}" style="{_BOX.format(colour)}">{esc(plain)} '
            f'<span style="{_MUTED}">({SOURCE})</span></div>')
    return html_bundle(f"{plain} ({SOURCE})", html)


def show_answers(output: Any) -> Callable[[str, Any, Any], None]:
    """An ``on_answer`` hook for ReplayedPerson that shows each answer in ``output``."""

    def hook(kind: str, asked: Any, answer: Any) -> None:
        # An approval's decision is on its tool's card, marked as from the recording
        # (render.py), above the result it led to: nothing below it.
        if kind == "questions":
            output.show(questions_bundle(asked, answer))

    return hook


def turn_interaction(session: Session, live: Interaction | None, output: Any,
                     before_ask: Callable[[], Any] | None) -> Interaction:
    """The Interaction for one notebook turn: ``live`` (the widget forms, or None when
    nobody is there) as chosen by :func:`crystal_kernel.host.recorded_person.person_for`."""
    from crystal_kernel.host.recorded_person import person_for

    return person_for(session, live, on_answer=show_answers(output), before_ask=before_ask)
