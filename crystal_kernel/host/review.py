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

import dataclasses
import json
import re
from typing import Any

from crystal_kernel.host.approval import Verdict, failed_verdict, host_risk_level, verdict_from
from crystal_kernel.host.sidecall import SideCallError, complete_text, render_conversation
from crystal_kernel.tools.base import Classification

DEFAULT_REVIEW_TIMEOUT = 60.0
# Bounds on what one review request carries.
CONVERSATION_LIMIT = 30_000
ARGUMENTS_LIMIT = 12_000


def review_timeout(session: Any) -> float:
    """Seconds one review may take: config ``reviewTimeoutSeconds`` (default 60)."""
    raw = getattr(session.config, "raw", {}) or {}
    value = raw.get("reviewTimeoutSeconds", DEFAULT_REVIEW_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return DEFAULT_REVIEW_TIMEOUT
    return float(value)


def parse_verdict_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that has ``risk_level`` or
    ``user_authorization``; code fences and prose around it are tolerated."""
    candidates: list[str] = [m.group(1) for m in re.finditer(r"```(?:json|JSON)?\s*(.*?)```", text, re.S)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and ("risk_level" in value or "user_authorization" in value):
                return value
    return None


def classification_summary(c: Classification) -> str:
    """One paragraph the reviewer reads under the host classification."""
    kind = "an external tool (exec set or plugin; the host treats it as at least a write)" if c.external \
        else "a built-in tool"
    where = "reaches outside the workspace" if str(c.authority) != "workspace" else "stays inside the workspace"
    return (f"This is {kind}; the call is {c.risk} risk and {where}. The host's floor for your "
            f"risk_level is {host_risk_level(c)}: a lower answer is raised to it.")


def _arguments_text(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, indent=2)
    if len(text) > ARGUMENTS_LIMIT:
        text = text[:ARGUMENTS_LIMIT] + f"\n[... {len(text) - ARGUMENTS_LIMIT} characters cut]"
    return text


def review_texts(session: Any, tool: str, arguments: dict[str, Any], c: Classification) -> tuple[str, str]:
    """The review system text and user text for one call (REV-3, PH-7)."""
    from crystal_kernel.prompts.compose import compose_named

    system = compose_named("review", session)
    user = compose_named("review.user", session, extra={
        "conversation": render_conversation(session.transcript, limit=CONVERSATION_LIMIT),
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

    def provider_for(self, session: Any) -> Any:
        """The session's provider, or the one ``reviewModel`` names (built once)."""
        spec = session.config.review_model
        if not spec:
            return session.provider
        if self._provider is not None and self._spec == spec:
            return self._provider
        from crystal_kernel.host.config import PROVIDERS
        from crystal_kernel.providers.registry import known_providers, make_provider

        name, sep, model = spec.partition(":")
        if not sep or name not in (*PROVIDERS, *known_providers()):
            name, model = session.config.provider, spec
        config = dataclasses.replace(session.config, provider=name, model=model)
        self._provider = make_provider(config, workspace=session.workspace)
        self._spec = spec
        return self._provider

    async def review(self, session: Any, tool: str, arguments: dict[str, Any], c: Classification) -> Verdict:
        try:
            provider = self.provider_for(session)
        except Exception as exc:  # a bad reviewModel: ask, and say why
            return failed_verdict(c, f"the reviewing model could not be set up: {str(exc).splitlines()[0]}")
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
