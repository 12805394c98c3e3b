"""The person behind an ACP client: approvals become ``session/request_permission``,
questions become an ``elicitation/create`` form when the client offers forms.

Without form elicitation the question tool is not registered at all (the session's
``questions_available`` is False), so :meth:`AcpInteraction.ask_questions` is only
reached when the client can show the form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from acp import RequestError, text_block, tool_content
from acp.schema import ElicitationFormSessionMode, PermissionOption, ToolCallUpdate
from pydantic import ValidationError

from crystal_kernel.acp.mapping import diff_content, proposed_change, tool_kind, tool_locations, tool_title
from crystal_kernel.core.deadline import within
from crystal_kernel.core.interaction import ApprovalRequest, PersonDecision, Question

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

# How long a permission request waits for its tool call to be announced first.
ANNOUNCE_WAIT_SECONDS = 5.0
OTHER_SUFFIX = "__other"
# The decision when the client closed the connection while a permission request was open.
CLIENT_GONE = "The client closed the connection, so nobody can approve this call."


def client_failed(what: str, exc: Exception) -> str:
    """One line saying that the client answered a request with an error or an answer
    that does not fit ACP's schema (the client's own text is not repeated)."""
    if isinstance(exc, RequestError):
        return f"The client answered the {what} with an error (JSON-RPC {exc.code}), so nobody approved this call."
    return f"The client's answer to the {what} is not a valid ACP answer, so nobody approved this call."


def permission_options(request: ApprovalRequest) -> list[PermissionOption]:
    """Allow once, allow for the rest of the session (this tool and pattern), reject."""
    what = f"{request.tool} `{request.session_pattern}`" if request.session_pattern else request.tool
    return [
        PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        PermissionOption(option_id="allow_session", name=f"Always allow {what} in this session", kind="allow_always"),
        PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
    ]


def decision_from(response: Any) -> PersonDecision:
    outcome = getattr(response, "outcome", None)
    if getattr(outcome, "outcome", None) == "selected":
        option = getattr(outcome, "option_id", "")
        if option == "allow_once":
            return PersonDecision(outcome="allow_once")
        if option == "allow_session":
            return PersonDecision(outcome="allow_session")
        return PersonDecision(outcome="deny", reason="The person rejected this call.")
    # "cancelled": the client withdrew the request (the prompt is being cancelled).
    return PersonDecision(outcome="deny", reason="The permission request was cancelled.")


def question_schema(questions: list[Question]) -> dict[str, Any]:
    """Q-1 as an ACP form: one field per question (a single choice, or a multi-select),
    plus a free-text field when custom answers are on."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for n, q in enumerate(questions, start=1):
        key = f"q{n}"
        options = [{"const": o.label, "title": o.label, **({"description": o.description} if o.description else {})}
                   for o in q.options]
        if options and q.multiple:
            properties[key] = {"type": "array", "title": q.header, "description": q.question,
                               "items": {"anyOf": options}}
        elif options:
            properties[key] = {"type": "string", "title": q.header, "description": q.question, "oneOf": options}
            if not q.custom:
                required.append(key)
        if q.custom:
            name = key if not options else key + OTHER_SUFFIX
            title = q.header if not options else f"{q.header}: another answer"
            description = q.question if not options else "Type your own answer instead of (or besides) a choice."
            properties[name] = {"type": "string", "title": title, "description": description}
            if not options:
                required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def answers_from(questions: list[Question], content: dict[str, Any] | None) -> list[list[str]]:
    """Q-4: per question, in order, the chosen labels; custom text counts as a label."""
    content = content or {}
    out: list[list[str]] = []
    for n, _q in enumerate(questions, start=1):
        key = f"q{n}"
        labels: list[str] = []
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            labels.append(value.strip())
        elif isinstance(value, list):
            labels += [str(v) for v in value if str(v).strip()]
        other = content.get(key + OTHER_SUFFIX)
        if isinstance(other, str) and other.strip():
            labels.append(other.strip())
        out.append(labels)
    return out


class AcpInteraction:
    """One ACP session's person. ``announced(call_id)`` returns an event the turn pump
    sets once the tool call's ``tool_call`` update has gone out, so a permission request
    never reaches the client before the call it is about."""

    person_present = True

    def __init__(self, conn: Any, session: Session, acp_session_id: str, *, elicitation: bool,
                 announced: Callable[[str], asyncio.Event]):
        self.conn = conn
        self.session = session
        self.acp_session_id = acp_session_id
        self.elicitation = elicitation
        self._announced = announced

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        try:
            # within, not asyncio.wait_for: a Stop landing as the announcement arrives
            # must not be dropped (wait_for before Python 3.12 drops it).
            await within(self._announced(request.call_id).wait(), ANNOUNCE_WAIT_SECONDS)
        except TimeoutError:
            pass
        content: list[Any] = list(diff_content(proposed_change(self.session, request.tool, request.arguments)) or [])
        if request.preview and not content:
            content.append(tool_content(text_block(f"```diff\n{request.preview.rstrip()}\n```")))
        if request.sandbox_note:  # SANDBOX-1: the call runs outside the sandbox
            content.append(tool_content(text_block(request.sandbox_note)))
        if request.verdict is not None:
            content.append(tool_content(text_block(request.verdict.summary())))
        tool_call = ToolCallUpdate(
            tool_call_id=request.call_id, title=tool_title(request.tool, request.arguments),
            kind=tool_kind(request.tool), status="pending", raw_input=request.arguments,
            locations=tool_locations(self.session, request.tool, request.arguments) or None,
            content=content or None,
        )
        try:
            response = await self.conn.request_permission(
                session_id=self.acp_session_id, tool_call=tool_call, options=permission_options(request),
            )
        except ConnectionError:
            return PersonDecision(outcome="deny", reason=CLIENT_GONE)
        except (RequestError, ValidationError) as exc:
            # The client answered with an error, or with something that is no answer:
            # nobody approved the call, and the turn goes on.
            return PersonDecision(outcome="deny", reason=client_failed("permission request", exc))
        return decision_from(response)

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        if not self.elicitation:
            return None
        mode = ElicitationFormSessionMode.model_validate(
            {"sessionId": self.acp_session_id, "requestedSchema": question_schema(questions)}
        )
        message = questions[0].question if len(questions) == 1 else "Crystal has a few questions."
        try:
            response = await self.conn.create_elicitation(message=message, mode=mode)
        except (ConnectionError, RequestError, ValidationError):
            return None  # the client is gone, or answered no form: nobody answered
        if getattr(response, "action", None) != "accept":
            return None
        return answers_from(questions, getattr(response, "content", None))
