"""The reviewing model (REV-1 … REV-3): one separate, tool-less request per call.

System text: the named ``review`` prompt plus enabled review attachments, without the
workspace instruction block (REV-3, composed by prompts/compose.py). User text: the
``review.user`` template with the PH-7 slots conversation, tool_name, tool_arguments,
host_risk, host_authority and classification_summary.

The model answers one JSON object; the host parses ``risk_level``,
``user_authorization`` and ``harm_unrequested`` and derives the outcome itself
(:func:`crystal_kernel.host.approval.verdict_from`), with the host's classification as
a floor. Garbage, a failure or a timeout gives a verdict whose outcome is ``ask``.

The reviewing model is the session's own, unless config ``reviewModel`` names another
(``MODEL`` on the session's provider, or ``PROVIDER:MODEL``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from crystal_kernel.core import paths
from crystal_kernel.core.events import ReviewVerdict
from crystal_kernel.host.approval import failed_verdict, host_risk_level, verdict_from
from crystal_kernel.host.recorded_person import untrusted_cassette
from crystal_kernel.host.sidecall import (
    SideCallError,
    complete_text,
    escape_json_tags,
    make_side_provider,
    render_conversation,
)
from crystal_kernel.host.view import SessionView
from crystal_kernel.prompts.compose import compose_named
from crystal_kernel.tools.base import Classification

DEFAULT_REVIEW_TIMEOUT = 60.0
# Bounds on what one review request carries.
CONVERSATION_LIMIT = 30_000
ARGUMENTS_LIMIT = 12_000


def review_timeout(session: SessionView) -> float:
    """Seconds one review may take: config ``reviewTimeoutSeconds`` (default 60)."""
    raw = getattr(session.config, "raw", {}) or {}
    value = raw.get("reviewTimeoutSeconds", DEFAULT_REVIEW_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return DEFAULT_REVIEW_TIMEOUT
    return float(value)


class ReviewAnswer(BaseModel):
    """The reviewer's answer, strictly: the three levels the review prompt asks for (an
    optional rationale). Levels are case-insensitive; anything else fails validation."""

    model_config = ConfigDict(extra="ignore")

    risk_level: Literal["low", "medium", "high"]
    user_authorization: Literal["low", "medium", "high"]
    harm_unrequested: bool
    rationale: str = ""

    @field_validator("risk_level", "user_authorization", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


def _top_level_objects(text: str) -> list[Any]:
    """Every JSON object in ``text`` that is not inside another one, in order."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = text.find("{")
    while 0 <= i < len(text):
        try:
            value, end = decoder.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):
            i = text.find("{", i + 1)
            continue
        found.append(value)
        i = text.find("{", end)
    return found


def parse_verdict_json(text: str) -> dict[str, Any] | None:
    """The reviewer's verdict: the LAST complete top-level JSON object in its answer that
    validates as :class:`ReviewAnswer` (code fences and prose around it are tolerated).

    The last one, because a reviewer quoting the call it judges may repeat a verdict
    planted in the tool arguments before giving its own; the prompt asks for the verdict
    as the answer's only (so last) object. Objects nested inside other objects never
    count, so a planted ``{"risk_level": …}`` inside a quoted argument object cannot win.
    """
    text = text[:20_000]
    for value in reversed(_top_level_objects(text)):
        if not isinstance(value, dict):
            continue
        try:
            answer = ReviewAnswer.model_validate(value)
        except ValidationError:
            continue
        return answer.model_dump()
    return None


def classification_summary(c: Classification) -> str:
    """One paragraph the reviewer reads under the host classification."""
    kind = "an external tool (exec set or plugin; the host treats it as at least a write)" if c.external \
        else "a built-in tool"
    where = "reaches outside the workspace" if str(c.authority) != "workspace" else "stays inside the workspace"
    return (f"This is {kind}; the call is {c.risk} risk and {where}. The host's floor for your "
            f"risk_level is {host_risk_level(c)}: a lower answer is raised to it.")


def _arguments_text(arguments: dict[str, Any]) -> str:
    text = escape_json_tags(json.dumps(arguments, ensure_ascii=False, indent=2))
    if len(text) > ARGUMENTS_LIMIT:
        text = text[:ARGUMENTS_LIMIT] + f"\n[... {len(text) - ARGUMENTS_LIMIT} characters cut]"
    return text


def review_fingerprint(workspace: Any) -> str:
    """TRUST-3: a hash of every workspace file that can change the reviewer's text
    (``.crystal/prompts/review*``, ``.crystal/prompt-attachments/*/``), taken when the
    session starts (or the person moves it with /cd)."""
    root = paths.host_dir(workspace)
    digest = hashlib.sha256()
    files = sorted(root.glob("prompts/review*")) + sorted(root.glob("prompt-attachments/*/*"))
    for path in files[:500]:
        try:
            data = path.read_bytes() if path.is_file() else b"<not a file>"
        except OSError:
            data = b"<unreadable>"
        digest.update(str(path).encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def workspace_review_files_ok(session: SessionView) -> bool:
    """False when a workspace file behind the reviewer's text changed since the session
    started: the acting model may have written it (TRUST-3), so the reviewer then reads
    only Home and built-in texts, and the person gets a note."""
    baseline = getattr(session, "review_baseline", None)
    if baseline is None:
        return True
    if review_fingerprint(session.workspace) == baseline:
        return True
    note = getattr(session, "note", None)
    if note is not None:
        note("The workspace's review prompts (.crystal/prompts/review*, .crystal/prompt-attachments/) changed "
             "during this session; the reviewer ignores them until the session is opened again.", once=True)
    return False


def review_texts(session: SessionView, tool: str, arguments: dict[str, Any], c: Classification) -> tuple[str, str]:
    """The review system text and user text for one call (REV-3, PH-7). The workspace's
    review texts count only as they were when the session started (TRUST-3)."""
    own = workspace_review_files_ok(session)
    system = compose_named("review", session, workspace_files=own)
    user = compose_named("review.user", session, workspace_files=own, extra={
        # Labelled JSON lines: model text cannot forge a person's line (GUARD-3).
        "conversation": render_conversation(session.transcript, limit=CONVERSATION_LIMIT, labelled=True),
        "tool_name": tool,
        "tool_arguments": _arguments_text(arguments),
        "host_risk": str(c.risk),
        "host_authority": str(c.authority),
        "classification_summary": classification_summary(c),
    })
    return system, user


class ModelReviewer:
    """The built-in :class:`~crystal_kernel.host.approval.Reviewer`."""

    def __init__(self) -> None:
        self._provider: Any = None
        self._spec: str | None = None

    def provider_for(self, session: SessionView) -> Any:
        """The session's provider, or the one ``reviewModel`` names (built once)."""
        spec = session.config.review_model
        if not spec:
            return session.provider
        if self._provider is not None and self._spec == spec:
            return self._provider
        self._provider = make_side_provider(session, spec)
        self._spec = spec
        return self._provider

    async def review(self, session: SessionView, tool: str, arguments: dict[str, Any], c: Classification) -> ReviewVerdict:
        try:
            provider = self.provider_for(session)
        except Exception as exc:  # a bad reviewModel: ask, and say why
            return failed_verdict(c, f"the reviewing model could not be set up: {str(exc).splitlines()[0]}")
        untrusted = untrusted_cassette(session)
        if untrusted is not None:  # TRUST-5: a planted cassette must not play the reviewer
            session.note(untrusted, once=True)
            return failed_verdict(c, "the reviewer's answer would come from a cassette that is not trusted")
        try:
            system, user = review_texts(session, tool, arguments, c)
        except Exception as exc:
            return failed_verdict(c, f"the review prompt could not be composed: {exc}")
        try:
            answer = await complete_text(session, provider, system=system, user=user, purpose="review",
                                         timeout=review_timeout(session), max_chars=8_000,
                                         max_output_tokens=1_000)
        except SideCallError as exc:
            return failed_verdict(c, str(exc))
        data = parse_verdict_json(answer)
        if data is None:
            return failed_verdict(c, "the reviewer's answer held no JSON verdict")
        return verdict_from(data, c)

    async def aclose(self) -> None:
        if self._provider is not None:
            closer = getattr(self._provider, "aclose", None)
            self._provider = None
            if closer is not None:
                await closer()
