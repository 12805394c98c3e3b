"""Deciding one tool call: policy, session allowances, the mode table, the reviewer,
then the person. Every decision is emitted as an ApprovalEvent and appended to the
session's audit log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from crystal_kernel.host.approval import apply_floor, forbidden_match, host_outcome
from crystal_kernel.host.events import ApprovalEvent
from crystal_kernel.host.interaction import ApprovalRequest, Interaction
from crystal_kernel.host.messages import ToolCallPart
from crystal_kernel.tools.base import Classification


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


async def decide(
    session: Any,
    interaction: Interaction,
    call: ToolCallPart,
    classification: Classification,
    emit: Callable[[ApprovalEvent], None],
) -> Decision:
    c = apply_floor(classification)
    verdict: dict[str, Any] | None = None

    def record(outcome: str, by: str, reason: str | None = None) -> None:
        emit(ApprovalEvent(id=call.id, name=call.name, outcome=outcome, by=by, reason=reason, verdict=verdict))
        session.audit.append(
            {
                "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "call": {"id": call.id, "name": call.name, "arguments": call.arguments},
                "classification": {"risk": str(c.risk), "authority": str(c.authority), "external": c.external},
                "verdict": verdict,
                "outcome": outcome,
                "by": by,
                "reason": reason,
            }
        )

    rule = forbidden_match(session.config.forbidden, call.name, call.arguments)
    if rule is not None:
        reason = f"forbidden rule {{tool: {rule['tool']}, pattern: {rule['pattern']}}}"
        record("deny", "policy", reason)
        return Decision(False, "policy", f"It matches a {reason}; it is denied in every approval mode.")

    outcome = host_outcome(session.approval, c)
    if outcome == "allow":
        record("allow", "host")
        return Decision(True, "host")

    if session.allowances.allows(call.name, c.pattern):
        record("allow", "person", "allowed for this session")
        return Decision(True, "person")

    # Plain reads were allowed above, so every call here goes to the reviewer (REV-*).
    if session.approval in ("review", "audit"):
        reviewer = getattr(session, "reviewer", None)
        if reviewer is not None:
            result = await reviewer.review(session, call.name, call.arguments, c)
            verdict = result.as_dict()
            if session.approval == "review" and result.outcome in ("allow", "deny"):
                record(result.outcome, "reviewer", result.rationale or None)
                return Decision(result.outcome == "allow", "reviewer", result.rationale or None)

    # Ask the person.
    if not interaction.person_present:
        reason = "No person is present to approve this call, so it was denied."
        record("deny", "host", reason)
        return Decision(False, "host", reason + " Do not retry it; say what you wanted to do instead.")
    record("ask", "host")
    answer = await interaction.ask_approval(
        ApprovalRequest(
            call_id=call.id, tool=call.name, arguments=call.arguments, risk=str(c.risk),
            authority=str(c.authority), external=c.external, verdict=verdict, session_pattern=c.pattern,
        )
    )
    if answer.outcome == "deny":
        record("deny", "person", answer.reason)
        return Decision(False, "person", answer.reason)
    if answer.outcome == "allow_session":
        session.allowances.allow(call.name, c.pattern)
    record("allow", "person", "allowed for this session" if answer.outcome == "allow_session" else None)
    return Decision(True, "person")
