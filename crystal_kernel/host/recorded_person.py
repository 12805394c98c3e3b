"""The person's side of a cassette: recorded while a person answers, replayed when nobody is there.

A cassette (providers/replay.py) holds the model's replies. When the model asked the
person something — a question form, an approval — the person's answer is stored on the
interaction whose reply holds that tool call, under the key ``person``::

    {"match": {...}, "reply": [..., {"tool_call": {"id": "call_edit", "name": "edit", ...}}],
     "person": [{"call": "call_edit", "approval": "allow_once"},
                {"call": "call_ask", "answers": [["Fix the code"]]}]}

``approval`` is ``allow_once``, ``allow_session`` or ``deny`` (with optional ``reason`` and
``scope`` as in :class:`PersonDecision`); ``answers`` is the question tool's answer, in
question order (``null``: the person dismissed the form).

- :class:`RecordingPerson` wraps a live front while recording: the person answers as
  usual and the answer is added to the newest recorded interaction.
- :class:`ReplayedPerson` answers from the cassette. A front uses it only under the
  replay provider when nobody is there (the kernel's and the magics' ``--unattended``);
  a live person still answers through the front's own forms. An ask the cassette holds
  no answer for is dismissed (questions) or denied (approvals), as with nobody there.

:func:`person_for` picks the right one; :func:`replays_person` tells a front that an
unattended session may still offer the question tool (the cassette answers it).

TRUST-5: a cassette inside the workspace's ``.crystal/`` (``.crystal/cassettes/*.json``,
where the default one is read without the person naming it) can come with a cloned
repository, so its recorded person answers stand in for the person
only when the person trusted that exact file (``crystal trust``); otherwise every ask is
dismissed or denied as with nobody there, and one note says how to trust it. The same
holds for a reviewer's verdict replayed from it (host/review.py). A cassette in Home, or
one the person named (``$CRYSTAL_CASSETTE``, Home's config) outside ``.crystal/``, is
the person's own choice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crystal_kernel.core import paths
from crystal_kernel.core.interaction import ApprovalRequest, Interaction, NoPerson, PersonDecision, Question
from crystal_kernel.core.trust import TrustStore, needs_content_trust
from crystal_kernel.host.view import PersonSeat, SessionView

#: ``on_answer(kind, asked, answer)``: kind "questions" (asked: list[Question], answer:
#: list[list[str]] | None) or "approval" (asked: ApprovalRequest, answer: PersonDecision).
AnswerHook = Callable[[str, Any, Any], None]

_OUTCOMES = ("allow_once", "allow_session", "deny")


def _replay_provider(session: SessionView) -> Any:
    from crystal_kernel.providers.replay import ReplayProvider

    provider = getattr(session, "provider", None)
    return provider if isinstance(provider, ReplayProvider) else None


def _recording_provider(session: SessionView) -> Any:
    from crystal_kernel.providers.replay import RecordingProvider

    provider = getattr(session, "provider", None)
    return provider if isinstance(provider, RecordingProvider) else None


def replays_person(session: SessionView) -> bool:
    """True when ``session`` replays a cassette, so recorded answers can stand in for a person."""
    return _replay_provider(session) is not None


def untrusted_cassette(session: SessionView) -> str | None:
    """The note to give when ``session`` replays a workspace cassette the person has not
    trusted as it is now (TRUST-5); None when its recorded answers may be used."""
    replay = _replay_provider(session)
    if replay is None:
        return None
    path = replay.path if replay.path.is_absolute() else Path(session.workspace) / replay.path
    # The workspace's .crystal/ is where a repository ships configuration (and where the
    # default cassette is read without the person naming it).
    if not needs_content_trust(session.home, paths.host_dir(session.workspace), path):
        return None
    state = TrustStore(session.home).state("cassette", path)
    return None if state.trusted else state.note()


def _same_questions(arguments: Any, questions: list[Question]) -> bool:
    asked = arguments.get("questions") if isinstance(arguments, dict) else None
    if not isinstance(asked, list) or len(asked) != len(questions):
        return False
    return all(isinstance(a, dict) and a.get("header") == q.header and a.get("question") == q.question
               for a, q in zip(asked, questions))


async def prepare_ask(before_ask: Callable[[], Awaitable[None] | None] | None) -> None:
    """What every person does before it asks (a replayed one here, the notebook's forms
    in jupyter/widgets.py): let the front render the events queued before this ask (the
    tool card) first, then run ``before_ask`` (the front's own step, awaited if it is a
    coroutine)."""
    for _ in range(3):
        await asyncio.sleep(0)
    if before_ask is not None:
        result = before_ask()
        if result is not None:
            await result


class ReplayedPerson:
    """Answers questions and approvals from the replayed cassette's ``person`` entries."""

    person_present = True

    def __init__(self, provider: Any, *, on_answer: AnswerHook | None = None,
                 before_ask: Callable[[], Any] | None = None, untrusted: str | None = None) -> None:
        self.provider = provider
        self.on_answer = on_answer
        self.before_ask = before_ask
        # TRUST-5: why the cassette's answers may not be used (None: they may).
        self.untrusted = untrusted
        self._used: set[int] = set()  # ids of person entries already given

    def _interactions(self) -> list[dict[str, Any]]:
        # The one served last first (it holds the call being decided), then the rest.
        data = getattr(self.provider, "_data", None) or {}
        everything = [i for i in data.get("interactions", []) if isinstance(i, dict)]
        last = self.provider.last_interaction
        return ([last] if last is not None else []) + [i for i in everything if i is not last]

    def _entry(self, call_id: str | None, want: str) -> dict[str, Any] | None:
        if self.untrusted is not None:
            return None
        for interaction in self._interactions():
            for entry in interaction.get("person") or []:
                if (isinstance(entry, dict) and want in entry and id(entry) not in self._used
                        and (call_id is None or entry.get("call") == call_id)):
                    self._used.add(id(entry))
                    return entry
        return None

    def _question_call(self, questions: list[Question]) -> str | None:
        for interaction in self._interactions():
            for item in interaction.get("reply") or []:
                call = item.get("tool_call") if isinstance(item, dict) else None
                if isinstance(call, dict) and call.get("name") == "question":
                    arguments = call.get("arguments")
                    if isinstance(arguments, str):
                        try:
                            arguments = json.loads(arguments)
                        except json.JSONDecodeError:
                            continue
                    if _same_questions(arguments, questions):
                        return str(call.get("id"))
        return None

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        await prepare_ask(self.before_ask)
        call_id = self._question_call(questions)
        entry = self._entry(call_id, "answers") if call_id else None
        answers = entry.get("answers") if entry else None
        if not (isinstance(answers, list) and len(answers) == len(questions)
                and all(isinstance(a, list) for a in answers)):
            answers = None
        else:
            answers = [[str(label) for label in a] for a in answers]
        if self.on_answer is not None:
            self.on_answer("questions", questions, answers)
        return answers

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        await prepare_ask(self.before_ask)
        entry = self._entry(request.call_id, "approval")
        if self.untrusted is not None:
            decision = PersonDecision(outcome="deny", reason="No person is present and the recording's answers "
                                      "are not trusted, so it was denied. Say what you wanted to do instead.",
                                      answered_by="the recording")
        elif entry is None or entry.get("approval") not in _OUTCOMES:
            decision = PersonDecision(outcome="deny", reason="The recording holds no decision for this call, "
                                      "so it was denied. Say what you wanted to do instead.",
                                      answered_by="the recording")
        else:
            decision = PersonDecision(outcome=entry["approval"], reason=entry.get("reason"),
                                      session_scope=entry.get("scope"), answered_by="the recording")
        if self.on_answer is not None:
            self.on_answer("approval", request, decision)
        return decision


class RecordingPerson:
    """A live front's Interaction whose answers are also written into the cassette being recorded."""

    def __init__(self, inner: Interaction, provider: Any) -> None:
        self.inner = inner
        self.provider = provider

    @property
    def person_present(self) -> bool:
        return self.inner.person_present

    @property
    def enforces_person_timeout(self) -> bool:
        """Whether the live front ends its own waits (host/person_deadline.py)."""
        return bool(getattr(self.inner, "enforces_person_timeout", False))

    def _add(self, entry: dict[str, Any]) -> None:
        from crystal_kernel.providers.replay import load_cassette

        try:
            data = load_cassette(self.provider.path)
            existing = list(data["interactions"][-1].get("person") or []) if data["interactions"] else []
            self.provider.annotate_last(person=[*existing, entry])
        except Exception:
            # The recording is a convenience: a cassette that cannot take the answer must
            # not fail the person's turn. The model's replies are recorded regardless.
            pass

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        answers = await self.inner.ask_questions(questions)
        call_id = _newest_call(self.provider, "question")
        self._add({"call": call_id, "answers": answers})
        return answers

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        decision = await self.inner.ask_approval(request)
        entry: dict[str, Any] = {"call": request.call_id, "approval": decision.outcome}
        if decision.reason:
            entry["reason"] = decision.reason
        if decision.session_scope:
            entry["scope"] = decision.session_scope
        self._add(entry)
        return decision


def _newest_call(provider: Any, name: str) -> str | None:
    from crystal_kernel.providers.replay import load_cassette

    try:
        data = load_cassette(provider.path)
    except Exception:
        return None
    if not data["interactions"]:
        return None
    calls = [item["tool_call"] for item in data["interactions"][-1].get("reply", [])
             if isinstance(item, dict) and isinstance(item.get("tool_call"), dict)]
    used = {e.get("call") for e in data["interactions"][-1].get("person") or [] if isinstance(e, dict)}
    for call in calls:
        if call.get("name") == name and call.get("id") not in used:
            return str(call.get("id"))
    return None


def person_for(session: SessionView, live: Interaction | None, *, on_answer: AnswerHook | None = None,
               before_ask: Callable[[], Any] | None = None) -> Interaction:
    """The Interaction a front should use for a turn.

    ``live`` is the front's own (widget forms), or None when nobody is there. Replaying
    with nobody there: the cassette answers. Recording with a person there: the person
    answers and the answer is recorded. Otherwise ``live``, or NoPerson.
    """
    if live is None:
        replay = _replay_provider(session)
        if replay is not None:
            untrusted = untrusted_cassette(session)
            if untrusted is not None:
                session.note(untrusted, once=True)
            return ReplayedPerson(replay, on_answer=on_answer, before_ask=before_ask, untrusted=untrusted)
        return NoPerson()
    recording = _recording_provider(session)
    if recording is not None and live.person_present:
        return RecordingPerson(live, recording)
    return live


def adopt_replayed_person(session: PersonSeat, unattended: bool) -> None:
    """An unattended session under replay still offers the question tool: the cassette
    answers it (the recorded run offered it, and the replay must match that run)."""
    if unattended and replays_person(session) and not session.person_present:
        session.person_present = True
        session.refresh_system()
