"""Approval: the DESIGN.md table, forbidden rules, session allowances, and who decided.

Host risk (read < write < execute) and authority (workspace < outside) classify each
call; external tools have a floor of write + workspace (MODE-3). Forbidden rules deny in
every mode before anything else. "Ask" with no person present resolves to deny.
The reviewing model (review/audit modes, REV-*) plugs in through :class:`Reviewer`.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from crystal_kernel.tools.base import Authority, Classification, Risk

Outcome = Literal["allow", "deny", "ask"]
DecidedBy = Literal["host", "reviewer", "person", "policy"]


def apply_floor(c: Classification) -> Classification:
    """MODE-3 / REV-2: external tools are at least write + workspace."""
    if c.external and c.risk < Risk.WRITE:
        return Classification(Risk.WRITE, c.authority, c.external, c.pattern)
    return c


def host_outcome(mode: str, c: Classification) -> Outcome:
    """The DESIGN.md table, without a reviewer: allow or ask."""
    c = apply_floor(c)
    if c.risk == Risk.READ and not c.external and c.authority == Authority.WORKSPACE:
        return "allow"
    if c.risk == Risk.READ and not c.external:
        # Reading an added directory outside the workspace was granted by /access.
        return "allow"
    if mode == "full":
        return "allow"
    if mode == "edit" and c.risk == Risk.WRITE and c.authority == Authority.WORKSPACE and not c.external:
        return "allow"
    return "ask"


def forbidden_match(rules: list[dict[str, str]], tool: str, arguments: dict[str, Any]) -> dict[str, str] | None:
    """SPEC §11: the glob matches a bash command, a file tool's path, else the arguments' JSON."""
    for rule in rules:
        if rule.get("tool") not in (tool, "*"):
            continue
        pattern = rule.get("pattern", "")
        subject = _rule_subject(arguments)
        if fnmatch.fnmatchcase(subject, pattern):
            return rule
    return None


def _rule_subject(arguments: dict[str, Any]) -> str:
    if isinstance(arguments.get("command"), str):
        return arguments["command"]
    if isinstance(arguments.get("path"), str):
        return arguments["path"]
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


@dataclass
class Verdict:
    """A reviewer's classification (REV-1) and the outcome the host derived from it."""

    outcome: Outcome
    risk_level: str | None = None
    user_authorization: str | None = None
    harm_unrequested: bool | None = None
    rationale: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "risk_level": self.risk_level,
            "user_authorization": self.user_authorization,
            "harm_unrequested": self.harm_unrequested,
            "rationale": self.rationale,
            "outcome": self.outcome,
        }


class Reviewer(Protocol):
    async def review(self, session: Any, tool: str, arguments: dict[str, Any], c: Classification) -> Verdict: ...


@dataclass
class SessionAllowances:
    """What a person allowed "for the session": a tool, or a tool with a pattern."""

    entries: list[tuple[str, str | None]] = field(default_factory=list)

    def allow(self, tool: str, pattern: str | None) -> None:
        if (tool, pattern) not in self.entries:
            self.entries.append((tool, pattern))

    def allows(self, tool: str, pattern: str | None) -> bool:
        for name, pat in self.entries:
            if name != tool:
                continue
            if pat is None or (pattern is not None and fnmatch.fnmatchcase(pattern, pat)):
                return True
        return False
