"""What the host may ask a person, and the protocol a front implements to answer.

The loop never blocks on a widget itself: it awaits the front's :class:`Interaction`.
A front with no person (``crystal run``, unattended execution) uses
:class:`NoPerson`: questions are unavailable and every "ask" resolves to deny.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from crystal_kernel.core.events import ReviewVerdict


class QuestionOption(BaseModel):
    label: str = Field(description="Returned when chosen.")
    description: str = Field(default="", description="What choosing it means.")


class Question(BaseModel):
    """One question of the question tool (SPEC Q-1)."""

    header: str = Field(description="A few words.")
    question: str = Field(description="The full question.")
    options: list[QuestionOption] = Field(default_factory=list, description="The choices.")
    multiple: bool = Field(default=False, description="Allow several choices.")
    custom: bool = Field(default=True, description="Allow a free-text answer.")


#: Q-3: the title of the one confirmation step a form with several questions, or a
#: multi-select one, goes through before its answers are sent (every front shows it).
CONFIRM_TITLE = "Submit these answers?"


def needs_confirmation(questions: list[Question]) -> bool:
    """Q-2, Q-3: one single-select question submits as soon as it is answered; several
    questions, or any multi-select one, go through the confirmation step first."""
    return not (len(questions) == 1 and not questions[0].multiple)


class ApprovalRequest(BaseModel):
    """A tool call waiting for a person's decision."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    risk: str
    authority: str
    external: bool = False
    # The reviewer's verdict in review/audit mode, shown to the person.
    verdict: ReviewVerdict | None = None
    # A pattern a person may allow for the rest of the session (e.g. the bash command).
    session_pattern: str | None = None
    # What the call would change (a per-cell diff for notebook_edit), when the tool says.
    preview: str | None = None
    # SANDBOX-1: the call runs outside the sandbox (the python tool, in the kernel; any
    # command on a system without one): the host's line saying so, which every front
    # shows as it stands (host/approval.py ``sandbox_note``).
    sandbox_note: str | None = None


class PersonDecision(BaseModel):
    outcome: Literal["allow_once", "allow_session", "deny"]
    reason: str | None = None
    # allow_session only: "tool" allows the whole tool; a glob the person typed (e.g.
    # "pytest *") allows matching calls; None allows this exact call's pattern again.
    session_scope: str | None = None
    # Who answered for the person when it was not a live person ("the recording").
    answered_by: str | None = None
    # Nobody answered: the form found no front end, or its wait ran out. The host then
    # records the denial as its own (nobody present), never as the person's.
    nobody: bool = False


class Interaction(Protocol):
    """Implemented by every front."""

    @property
    def person_present(self) -> bool: ...

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        """Answers per question in order (labels; custom text counts), or None if dismissed."""
        ...

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision: ...


class NoPerson:
    """The front where nobody can answer: questions unavailable, asks denied."""

    person_present = False

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        return None

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        return PersonDecision(
            outcome="deny",
            reason="No person is present to approve this call, so it was denied. "
            "Do not retry it; explain what you wanted to do instead.",
        )
