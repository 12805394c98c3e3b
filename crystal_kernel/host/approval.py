"""Approval: the DESIGN.md table, forbidden rules, the review outcome (REV-*), and
session allowances.

Host risk (read < write < execute) and authority (workspace < outside) classify each
call; external tools have a floor of write + workspace (MODE-3). Forbidden rules deny in
every mode before anything else. "Ask" with no person present resolves to deny.
The reviewing model (review/audit modes) plugs in through :class:`Reviewer`; whatever it
says, the host derives the outcome itself (:func:`review_outcome`) with the host's
classification as a floor (:func:`floored_risk`). docs/approval.md explains the choices.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from crystal_kernel.core.events import Outcome, ReviewVerdict
from crystal_kernel.host.shell_rules import SHELL_TOOLS, allowance_covers, rule_matches_command, shell_view
from crystal_kernel.tools.base import Authority, Classification, Risk

Level = Literal["low", "medium", "high"]

LEVELS: tuple[Level, ...] = ("low", "medium", "high")


def apply_floor(c: Classification) -> Classification:
    """MODE-3 / REV-2: external tools are at least write + workspace."""
    if c.external and c.risk < Risk.WRITE:
        return dataclasses.replace(c, risk=Risk.WRITE)
    return c


def is_plain_read(c: Classification) -> bool:
    """A built-in read. Reads outside the workspace only succeed inside a directory the
    person added with /access, so they count as reads too (the table's read column)."""
    c = apply_floor(c)
    return c.risk == Risk.READ and not c.external


def host_outcome(mode: str, c: Classification) -> Outcome:
    """The DESIGN.md table without a reviewer: ``allow`` or ``ask``.

    review and audit answer ``ask`` for everything but reads: the flow then consults
    the reviewer (review) or shows its classification to the person (audit).
    """
    c = apply_floor(c)
    if is_plain_read(c) or mode == "full":
        return "allow"
    if mode == "edit" and c.risk == Risk.WRITE and c.authority == Authority.WORKSPACE and not c.external:
        return "allow"
    return "ask"


# ----- SANDBOX-1: calls that run outside the sandbox ------------------------------------

UNCONFINED_REASON = ("The sandbox for tool processes is not available on this system (no Landlock), so this "
                     "command would run unconfined; a person decides it in every approval mode.")


def outside_sandbox(c: Classification) -> bool:
    """Whether the call runs what the model wrote where no sandbox confines it: a tool
    that runs it unsandboxed by design (the python tool), or a sandboxed tool on a
    system without the sandbox. Such a call is asked of a person in every approval mode,
    ``full`` and ``review`` included (SANDBOX-1)."""
    return bool(c.unsandboxed) or c.unconfined


def sandbox_note(c: Classification) -> str | None:
    """The one line every front's approval form shows for a call that runs outside the
    sandbox (the notebook form, the interactive terminal, the ACP permission request),
    or None. Written here once, so the fronts say the same thing."""
    if c.unsandboxed:
        return (f"It runs unsandboxed {c.unsandboxed}: outside the sandbox, with your own rights (it can "
                "change any file you can, .crystal/ and Home included, and use the network). A person "
                "decides it in every approval mode.")
    if c.unconfined:
        return UNCONFINED_REASON
    return None


# ----- REV-1 / REV-2 -----------------------------------------------------------------

def host_risk_level(c: Classification) -> Level:
    """REV-2: the host's floor for the reviewer's ``risk_level``.

    The review prompt's own scale puts reads and task edits inside the workspace at
    ``low``, wider changes (build scripts, commits) at ``medium`` and anything beyond the
    workspace at ``high``. What the host knows for certain maps onto it as:

    - read, and write inside the workspace (external tools included, MODE-3) -> low;
    - execute (a shell command can do anything the user can) -> medium;
    - outside-workspace authority -> high, whatever the risk.

    So a reviewer can never let a shell command run unattended unless the person asked
    for it (REV-1 needs high authorization for medium risk), nor anything outside the
    workspace. docs/approval.md explains the choice.
    """
    c = apply_floor(c)
    if c.authority == Authority.OUTSIDE:
        return "high"
    if c.risk == Risk.EXECUTE:
        return "medium"
    return "low"


def floored_risk(reviewer_risk: str, c: Classification) -> Level:
    """The reviewer's risk, never lower than the host's (REV-2)."""
    floor = host_risk_level(c)
    level = reviewer_risk if reviewer_risk in LEVELS else "high"
    return LEVELS[max(LEVELS.index(level), LEVELS.index(floor))]


def review_outcome(risk: str, authorization: str, harm_unrequested: bool) -> Outcome:
    """REV-1, derived by the host from the reviewer's levels.

    ==========  ===========  ============  ==========
    risk        auth low     auth medium   auth high
    ==========  ===========  ============  ==========
    low         deny         allow         allow
    medium      deny         ask           allow
    high        deny         ask           allow
    ==========  ===========  ============  ==========

    ``high`` authorization means the person explicitly asked for this action, so high
    risk with high authorization is "high risk that the user explicitly requested".
    Harm the person did not ask for denies whatever the levels. Unknown levels ask.
    """
    if risk not in LEVELS or authorization not in LEVELS:
        return "ask"
    if harm_unrequested or authorization == "low":
        return "deny"
    if authorization == "high":
        return "allow"
    return "allow" if risk == "low" else "ask"


def verdict_from(data: dict[str, Any], c: Classification) -> ReviewVerdict:
    """Turn a parsed reviewer answer into a verdict with the host's outcome."""
    risk = str(data.get("risk_level", "")).strip().lower()
    auth = str(data.get("user_authorization", "")).strip().lower()
    harm_raw = data.get("harm_unrequested", False)
    if isinstance(harm_raw, str):
        harm = harm_raw.strip().lower() in ("true", "yes", "1")
    else:
        harm = bool(harm_raw)
    rationale = str(data.get("rationale", "") or "").strip()[:2000]
    host_level = host_risk_level(c)
    if risk not in LEVELS or auth not in LEVELS:
        return ReviewVerdict(outcome="ask", risk_level=risk or None, user_authorization=auth or None,
                             harm_unrequested=harm, rationale=rationale, host_risk=host_level,
                             error="the verdict did not give risk_level and user_authorization as low, "
                                   "medium or high")
    effective = floored_risk(risk, c)
    return ReviewVerdict(outcome=review_outcome(effective, auth, harm), risk_level=risk, user_authorization=auth,
                         harm_unrequested=harm, rationale=rationale, effective_risk=effective, host_risk=host_level)


def failed_verdict(c: Classification, why: str) -> ReviewVerdict:
    """A reviewer that failed, timed out or answered garbage: the outcome is ask."""
    return ReviewVerdict(outcome="ask", host_risk=host_risk_level(c), error=why[:300])


class Reviewer(Protocol):
    """Classifies one call. Implementations never raise for model trouble: they return
    a verdict whose outcome is ``ask`` (the flow also guards against raising)."""

    async def review(self, session: Any, tool: str, arguments: dict[str, Any], c: Classification) -> ReviewVerdict: ...


# ----- forbidden rules (SPEC §11) -------------------------------------------------------

def rule_names_tool(rule_tool: str, tool: str) -> bool:
    """Whether a rule's ``tool`` (a name or a glob) names ``tool``. A rule for one shell
    tool (``bash``) covers every tool that runs a shell command (``bash_start``)."""
    if rule_tool == tool or fnmatch.fnmatchcase(tool, rule_tool):
        return True
    return tool in SHELL_TOOLS and any(
        rule_tool == t or fnmatch.fnmatchcase(t, rule_tool) for t in SHELL_TOOLS)


def forbidden_match(rules: list[dict[str, str]], tool: str, arguments: dict[str, Any],
                    workspace: Any = None) -> dict[str, str] | None:
    """SPEC §11: the glob matches a bash command, a file tool's path, else the arguments' JSON.

    A command is parsed (crystal_kernel/host/shell_rules.py): the rule matches the whole
    line, or any simple command in it, nested and wrapped ones included, with flags
    normalised (``rm -rf *`` catches ``rm -r -f``, ``/bin/rm -fr``, ``sudo rm -Rf``,
    ``bash -c 'rm -rf /'``). A path matches as written, relative to the workspace, or
    absolute; a leading ``**/`` also matches at the top (``**/.git/**`` catches
    ``.git/config``). ``tool`` may be a glob.
    """
    command = arguments.get("command")
    shell = (command, shell_view(command)) if isinstance(command, str) else None
    for rule in rules:
        if not rule_names_tool(rule.get("tool", ""), tool):
            continue
        pattern = rule.get("pattern", "")
        if shell is not None:
            if rule_matches_command(pattern, *shell):
                return rule
            continue
        patterns = [pattern]
        if pattern.startswith("**/"):
            patterns.append(pattern[3:])
        for subject in _rule_subjects(arguments, workspace):
            if any(fnmatch.fnmatchcase(subject, p) for p in patterns):
                return rule
    return None


def forbidden_unsure(rules: list[dict[str, str]], tool: str, arguments: dict[str, Any]) -> str | None:
    """Why a shell command could not be checked against the forbidden rules that name its
    tool, or None. Such a call must not pass silently: the flow asks a person (and with
    nobody present, denies)."""
    command = arguments.get("command")
    if tool not in SHELL_TOOLS or not isinstance(command, str):
        return None
    if not any(rule_names_tool(r.get("tool", ""), tool) for r in rules):
        return None
    view = shell_view(command)
    if view.unsure:
        return f"the command could not be parsed confidently to check the forbidden rules ({view.unsure})"
    return None


def _rule_subjects(arguments: dict[str, Any], workspace: Any) -> list[str]:
    path = arguments.get("path")
    if isinstance(path, str):
        import os
        from pathlib import Path

        subjects = [path]
        normal = os.path.normpath(path)
        subjects.append(normal)
        if workspace is not None:
            absolute = Path(path).expanduser()
            if not absolute.is_absolute():
                absolute = Path(workspace) / absolute
            absolute_text = os.path.normpath(str(absolute))
            subjects.append(absolute_text)
            real = os.path.realpath(absolute_text)
            subjects.append(real)
            try:
                subjects.append(os.path.relpath(real, os.path.realpath(str(workspace))))
            except ValueError:
                pass
        return subjects
    return [json.dumps(arguments, sort_keys=True, ensure_ascii=False)]


# ----- what a person allowed -------------------------------------------------------------

@dataclass
class SessionAllowances:
    """What a person allowed "for the session": a whole tool, one exact pattern (the
    bash command or path of the call they saw), or a glob they typed themselves.

    An exact pattern never widens: allowing ``rm -rf build/*`` once for the session does
    not allow ``rm -rf /``. A glob for a shell tool must match every simple command of
    the line (``pytest *`` does not cover ``pytest; touch x`` or ``pytest $(rm x)``).
    """

    entries: list[tuple[str, str | None, bool]] = field(default_factory=list)

    def allow(self, tool: str, pattern: str | None, *, glob: bool = False) -> None:
        entry = (tool, pattern, glob and pattern is not None)
        if entry not in self.entries:
            self.entries.append(entry)

    def allows(self, tool: str, pattern: str | None) -> bool:
        for name, pat, glob in self.entries:
            if name != tool:
                continue
            if pat is None:
                return True
            if pattern is None:
                continue
            if not glob:
                if pattern == pat:
                    return True
            elif tool in SHELL_TOOLS:
                if allowance_covers(pat, pattern):
                    return True
            elif fnmatch.fnmatchcase(pattern, pat):
                return True
        return False
