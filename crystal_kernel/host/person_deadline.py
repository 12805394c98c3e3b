"""Every wait for a person ends (SPEC §13 "Waits", config ``personTimeoutSeconds``).

A turn asks its front's :class:`~crystal_kernel.core.interaction.Interaction` for
approvals and answers. :func:`with_person_deadline` wraps that interaction for every
turn (host/loop.py), whatever the front: a person who never answers (an ACP client that
never replies to ``session/request_permission``, a form left open) has the call denied
by the host (``nobody``: not "by the person") and the question dismissed after
``personTimeoutSeconds``, with a note saying so, and the turn goes on.
``personTimeoutSeconds: 0`` means nobody answers: nothing is asked.

A front whose own forms already end by that time (the notebook widgets, which also take
``--ask-timeout``) says so with ``enforces_person_timeout = True`` and is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

from crystal_kernel.core.deadline import within
from crystal_kernel.core.interaction import ApprovalRequest, Interaction, PersonDecision, Question


def timeout_note(seconds: float) -> str:
    """The one line said when nobody answered in time."""
    if seconds <= 0:
        return "Nobody answers here (personTimeoutSeconds is 0), so nothing was asked."
    return f"Nobody answered within {seconds:g} seconds (personTimeoutSeconds)."


class PersonDeadline:
    """``inner`` with every ask bounded by ``seconds``."""

    def __init__(self, inner: Interaction, seconds: float, note: Callable[[str], None]) -> None:
        self.inner = inner
        self.seconds = seconds
        self._note = note

    @property
    def person_present(self) -> bool:
        return self.inner.person_present

    # core.deadline.within, not asyncio.wait_for: wait_for loses a cancel (the turn's
    # stop) that arrives as the person answers, and the turn would run on.
    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        try:
            return await within(self.inner.ask_approval(request), self.seconds)
        except TimeoutError:
            pass
        line = timeout_note(self.seconds)
        self._note(f"{line} The {request.tool} call was denied.")
        # Nobody answered: the host denies (core/interaction.py), so the audit log and the
        # model never read it as the person's decision.
        return PersonDecision(outcome="deny", reason=line, nobody=True)

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        try:
            return await within(self.inner.ask_questions(questions), self.seconds)
        except TimeoutError:
            pass
        self._note(f"{timeout_note(self.seconds)} The questions were dismissed.")
        return None


def with_person_deadline(interaction: Interaction, seconds: float | None,
                         note: Callable[[str], None]) -> Interaction:
    """``interaction`` whose waits end by ``seconds`` (None: no deadline); unchanged when
    nobody is there to wait for or when it keeps that deadline itself."""
    if seconds is None or not interaction.person_present:
        return interaction
    if getattr(interaction, "enforces_person_timeout", False):
        return interaction
    return PersonDeadline(interaction, max(0.0, float(seconds)), note)
