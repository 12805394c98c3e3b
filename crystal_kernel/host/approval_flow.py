"""Deciding one tool call: forbidden rules, the mode table, session allowances, the
reviewer, then the person.

Order (DESIGN.md's table, REV-1/2, SPEC §11 ``forbidden``):

1. A forbidden rule denies, in every mode, before any reviewer is asked (by policy).
2. The host table: reads, ``full``, and workspace writes in ``edit`` are allowed (host).
3. ``review``: an allowance the person gave for the session allows; otherwise the
   reviewer's verdict allows or denies (reviewer); its ``ask`` goes to the person.
4. ``audit``: the reviewer classifies every non-read call, for the person and the log;
   then a session allowance or the person decides.
5. Other modes: a session allowance, else the person.

"Ask" with no person present is a deny by the host, with a message to the model.
Every decision is emitted as an :class:`ApprovalEvent` (with the verdict, when there is
one) and appended to the session's audit log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from crystal_kernel.core.deadline import within
from crystal_kernel.core.events import ApprovalEvent, Decider, Outcome, ReviewVerdict
from crystal_kernel.core.interaction import ApprovalRequest, Interaction, PersonDecision
from crystal_kernel.core.messages import ToolCallPart
from crystal_kernel.host.approval import (
    apply_floor,
    failed_verdict,
    forbidden_match,
    forbidden_unsure,
    host_outcome,
    host_risk_level,
    outside_sandbox,
    sandbox_note,
    verdict_from,
)
from crystal_kernel.tools.base import Classification

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

# Strings longer than this are shortened in the audit log (a write's content, say).
AUDIT_VALUE_LIMIT = 2000
# The audit log keeps this many decisions; older ones are dropped (bounded documents).
AUDIT_LIMIT = 5000


@dataclass
class Decision:
    allowed: bool
    by: str
    reason: str | None = None

    def message_for_model(self) -> str:
        base = "The call was denied"
        who = {"policy": " by a forbidden rule", "person": " by the person", "reviewer": " by the reviewer",
               "host": ""}.get(self.by, "")
        return f"{base}{who}." + (f" Reason: {self.reason}" if self.reason else "")


class Record(Protocol):
    """Records one step of a decision: an approval event for the fronts and an audit row."""

    def __call__(self, outcome: Outcome, by: Decider, reason: str | None = None) -> None: ...


def classification_dict(c: Classification) -> dict[str, Any]:
    return {"risk": str(c.risk), "authority": str(c.authority), "external": c.external,
            "level": host_risk_level(c)}


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > AUDIT_VALUE_LIMIT:
        return value[:AUDIT_VALUE_LIMIT] + f"... [{len(value) - AUDIT_VALUE_LIMIT} characters more]"
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value[:200]]
    return value


def get_reviewer(session: Session) -> Any:
    """The session's reviewer; review and audit modes get the model reviewer on first use,
    so every front (kernel, magics, CLI, ACP) has one without wiring it itself."""
    reviewer = session.reviewer
    if reviewer is None:
        from crystal_kernel.host.review import ModelReviewer

        reviewer = ModelReviewer()
        session.reviewer = reviewer
    return reviewer


async def run_reviewer(session: Session, call: ToolCallPart, c: Classification) -> ReviewVerdict:
    """Ask the reviewer; an exception or an overrun is a failed verdict (ask)."""
    from crystal_kernel.host.review import review_timeout

    reviewer = get_reviewer(session)
    try:
        # The reviewer bounds its own request; this guards reviewers that do not.
        verdict = await within(reviewer.review(session, call.name, call.arguments, c),
                               review_timeout(session) + 5)
    except TimeoutError:
        return failed_verdict(c, "the reviewer did not answer in time")
    except Exception as exc:
        return failed_verdict(c, f"the reviewer failed: {type(exc).__name__}: {exc}")
    if not isinstance(verdict, ReviewVerdict):
        return failed_verdict(c, "the reviewer returned no verdict")
    if verdict.error:
        return verdict
    # Whatever reviewer is plugged in, the host derives the outcome from its levels with
    # the host floor (REV-1, REV-2); a verdict without levels cannot allow or deny.
    return verdict_from(verdict.model_dump(), c)


async def decide(
    session: Session,
    interaction: Interaction,
    call: ToolCallPart,
    classification: Classification,
    emit: Callable[[ApprovalEvent], None],
) -> Decision:
    c = apply_floor(classification)
    verdict: ReviewVerdict | None = None

    def record(outcome: Outcome, by: Decider, reason: str | None = None) -> None:
        emit(ApprovalEvent(id=call.id, name=call.name, outcome=outcome, by=by, reason=reason, verdict=verdict))
        session.audit.append(
            {
                "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "mode": session.approval,
                "call": {"id": call.id, "name": call.name, "arguments": _short(call.arguments)},
                "classification": classification_dict(c),
                "verdict": None if verdict is None else verdict.model_dump(exclude=set() if verdict.error else {"error"}),
                "outcome": outcome,
                "by": by,
                "reason": reason,
            }
        )
        if len(session.audit) > AUDIT_LIMIT:
            del session.audit[: len(session.audit) - AUDIT_LIMIT]

    rule = forbidden_match(session.config.forbidden, call.name, call.arguments, session.workspace)
    if rule is not None:
        reason: str | None = f"forbidden rule {{tool: {rule['tool']}, pattern: {rule['pattern']}}}"
        record("deny", "policy", reason)
        return Decision(False, "policy", f"It matches a {reason}; it is denied in every approval mode.")

    unsure = forbidden_unsure(session.config.forbidden, call.name, call.arguments)
    if unsure is not None:
        # A command the forbidden check cannot read must not pass it silently: a person
        # decides, in every mode (GUARD-1); with nobody present that is a deny.
        return await _ask_person(session, interaction, call, c, None, "policy", unsure + ".", record)

    mode = session.approval
    if c.host_owned:
        # TRUST-3: a file that steers the host changes only with the person's yes, in
        # every mode (full included); no reviewer verdict or session allowance stands in.
        return await _ask_person_only(session, interaction, call, c, record)
    if outside_sandbox(c) and mode in ("full", "review"):
        # SANDBOX-1: these modes let commands run (or a reviewer allow them) because the
        # sandbox confines them; a call no sandbox confines (the python tool, or any
        # command on a system without the sandbox) is the person's to decide. A session
        # allowance the person gave still counts.
        if session.allowances.allows(call.name, c.pattern):
            record("allow", "person", "allowed for this session")
            return Decision(True, "person")
        return await _ask_person(session, interaction, call, c, None, "host", sandbox_note(c), record)
    if host_outcome(mode, c) == "allow":
        record("allow", "host")
        return Decision(True, "host")

    allowed_for_session = session.allowances.allows(call.name, c.pattern)
    if mode == "audit":
        # Audit classifies every non-read call, even one the person allowed for the session.
        verdict = await run_reviewer(session, call, c)
    if allowed_for_session:
        record("allow", "person", "allowed for this session")
        return Decision(True, "person")

    asked_by: Decider = "host"
    if mode == "review":
        verdict = await run_reviewer(session, call, c)
        if verdict.outcome in ("allow", "deny"):
            reason = verdict.rationale or None
            record(verdict.outcome, "reviewer", reason)
            return Decision(verdict.outcome == "allow", "reviewer", reason)
        asked_by = "reviewer"

    # Ask the person (showing the reviewer's classification in review and audit).
    ask_reason = verdict.summary() if verdict is not None else None
    return await _ask_person(session, interaction, call, c, verdict, asked_by, ask_reason, record)


async def preview_of(c: Classification) -> str | None:
    """The change a person is asked to approve (GUARD-4): ``c.preview``, or made now by
    ``c.make_preview`` in a worker thread (it reads the file; ROBUST-3: a file system that
    stops answering holds that thread, not the turn's cancel)."""
    if c.preview is not None or c.make_preview is None:
        return c.preview
    return await asyncio.to_thread(c.make_preview)


async def _ask_person(session: Session, interaction: Interaction, call: ToolCallPart, c: Classification,
                      verdict: ReviewVerdict | None, asked_by: Decider, ask_reason: str | None,
                      record: Record) -> Decision:
    """The person decides (``ask``); nobody present is a deny by the host."""
    record("ask", asked_by, ask_reason)
    if not interaction.person_present:
        reason = "No person is present to approve this call, so it was denied."
        record("deny", "host", reason)
        hint = f" The reviewer said: {verdict.rationale}" if verdict is not None and verdict.rationale else ""
        if verdict is None and ask_reason:
            hint = f" Why a person was needed: {ask_reason}"
        return Decision(False, "host", reason + hint + " Do not retry it; say what you wanted to do instead.")
    answer = await interaction.ask_approval(
        ApprovalRequest(
            call_id=call.id, tool=call.name, arguments=call.arguments, risk=str(c.risk),
            authority=str(c.authority), external=c.external,
            verdict=verdict, session_pattern=c.pattern,
            preview=await preview_of(c), sandbox_note=sandbox_note(c),
        )
    )
    via = f"answered from {answer.answered_by}" if answer.answered_by else None
    if answer.nobody:
        return _nobody_answered(answer, record)
    if answer.outcome == "deny":
        record("deny", "person", "; ".join(x for x in (via, answer.reason) if x) or None)
        return Decision(False, "person", answer.reason)
    if answer.outcome == "allow_session":
        scope = getattr(answer, "session_scope", None)
        if scope == "tool":
            session.allowances.allow(call.name, None)
        elif scope:
            session.allowances.allow(call.name, scope, glob=True)
        else:
            session.allowances.allow(call.name, c.pattern)
    scope_text = "allowed for this session" if answer.outcome == "allow_session" else None
    record("allow", "person", "; ".join(x for x in (via, scope_text) if x) or None)
    return Decision(True, "person")


NOBODY_ANSWERED = "No person is present to approve; denied."


def _nobody_answered(answer: PersonDecision, record: Record) -> Decision:
    """The form ended with nobody there (no front end, or the wait ran out): a denial by
    the host that says so, never one "by the person"."""
    reason = f"{NOBODY_ANSWERED} {answer.reason}" if answer.reason else NOBODY_ANSWERED
    record("deny", "host", reason)
    return Decision(False, "host", reason)


HOST_OWNED_REASON = ("It changes a file that steers Crystal (.crystal/ or Crystal's Home: prompts, review "
                     "texts, tool manifests, mcp.json, session documents, the search index, config); only "
                     "the person may allow that.")


async def _ask_person_only(session: Session, interaction: Interaction, call: ToolCallPart, c: Classification,
                           record: Record) -> Decision:
    """TRUST-3: ask the person, every time; deny when nobody is there."""
    record("ask", "host", HOST_OWNED_REASON)
    if not interaction.person_present:
        reason = "No person is present to approve a change to a host-owned file, so it was denied."
        record("deny", "host", reason)
        return Decision(False, "host", reason + " Do not retry it; tell the person what you wanted to change.")
    answer = await interaction.ask_approval(
        ApprovalRequest(
            call_id=call.id, tool=call.name, arguments=call.arguments, risk=str(c.risk),
            authority=str(c.authority), external=c.external, verdict=None, session_pattern=None,
            preview=await preview_of(c), sandbox_note=sandbox_note(c),
        )
    )
    via = f"answered from {answer.answered_by}" if answer.answered_by else None
    if answer.nobody:
        return _nobody_answered(answer, record)
    if answer.outcome == "deny":
        record("deny", "person", "; ".join(x for x in (via, answer.reason) if x) or None)
        return Decision(False, "person", answer.reason)
    # "Allow for the session" counts once here: the next change asks again.
    record("allow", "person", "; ".join(x for x in (via, "host-owned file, allowed once") if x))
    return Decision(True, "person")
