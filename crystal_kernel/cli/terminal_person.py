"""The person at the terminal of an interactive ``crystal`` (SPEC §13 Fronts).

Approvals become a prompt that shows the command or the diff first and takes allow
once / allow for the session / deny with a typed reason (the reason reaches the model
exactly as typed). The question tool becomes a form: choices by number, several
numbers for a multi-select, or free text. Everything the model or a file produced goes
through ``terminal_safe`` before it reaches the screen (TRUST-6); colour only for what
Crystal itself adds, and none under ``NO_COLOR``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession

from crystal_kernel.core.interaction import CONFIRM_TITLE, ApprovalRequest, PersonDecision, Question, needs_confirmation
from crystal_kernel.core.textsafe import terminal_safe
from crystal_kernel.tools._proposed import proposed_diff

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

# How many characters of a command, of arguments or of a diff an approval shows; a
# longer one is cut with a line saying so (never silently: the person may deny what they
# cannot see).
CALL_LIMIT = 20_000
# The arguments of an edit or write that the host's diff draws (tools/_proposed.py).
DIFF_DRAWS = frozenset({"path", "content", "old_string", "new_string", "replace_all"})
INTERRUPTED = "The person interrupted the turn (Ctrl-C) instead of answering."

_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"


def colour_enabled() -> bool:
    """https://no-color.org: any non-empty NO_COLOR turns colour off; so does a dumb terminal."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def coloured_diff(diff: str, *, colour: bool) -> str:
    """A unified diff made safe for the terminal, its invisible characters shown
    (``\\u200b``), its lines coloured by their first character; whole up to
    ``CALL_LIMIT`` characters (GUARD-4) and cut past it with a line saying so."""
    lines = shown_call(diff.rstrip("\n"), what="diff").splitlines()
    if not colour:
        return "\n".join(lines)
    out = []
    for line in lines:
        start = _COLOURS.get(line[:1]) if not line.startswith(("+++", "---")) else _BOLD
        out.append(f"{start}{line}{_RESET}" if start else line)
    return "\n".join(out)


def shown_call(text: str, what: str = "call") -> str:
    """A command or a call's arguments as an approval shows them: every control and
    invisible character visible (TRUST-6, ``terminal_safe`` exact), whole up to
    ``CALL_LIMIT`` characters and cut past it with a line saying so."""
    more = ""
    if len(text) > CALL_LIMIT:
        more = (f"\n[The {what} is {len(text):,} characters long; only the first {CALL_LIMIT:,} are shown. "
                "Deny it if you cannot judge it.]")
        text = text[:CALL_LIMIT]
    return terminal_safe(text, exact=True) + more


def approval_text(session: Session, request: ApprovalRequest, *, colour: bool) -> str:
    """What the person reads before deciding: the tool, why it asks, and the command or the diff."""
    tool = terminal_safe(request.tool, exact=True)
    title = f"{_BOLD}Allow {tool}?{_RESET}" if colour else f"Allow {tool}?"
    lines = [title + f"  (risk: {terminal_safe(request.risk)})"]
    arguments = request.arguments if isinstance(request.arguments, dict) else {}
    command = arguments.get("command")
    # GUARD-4: the same diff every front shows (tools/_proposed.py), computed before the call runs.
    diff = request.preview or proposed_diff(session.access, request.tool, arguments)
    # GUARD-4: every argument is on screen. What the command line or the diff draws is
    # not repeated; every other argument follows it whole (``args: ["push", "--force"]``
    # beside a long command must not go unseen).
    rest: dict[str, object] = dict(arguments)
    if isinstance(command, str):
        lines.append("  $ " + shown_call(command).replace("\n", "\n    "))
        del rest["command"]
    elif diff:
        lines.append(coloured_diff(diff, colour=colour))
        if request.tool in ("edit", "write"):  # the host's diff draws all these take
            rest = {k: v for k, v in rest.items() if k not in DIFF_DRAWS}
    else:
        lines.append("  " + shown_call(json.dumps(arguments, ensure_ascii=False)))
        rest = {}
    if rest:
        lines.append("  with " + shown_call(json.dumps(rest, ensure_ascii=False)))
    if request.sandbox_note:  # SANDBOX-1: the host's line for a call no sandbox confines
        lines.append(terminal_safe(request.sandbox_note))
    if request.verdict is not None:
        lines.append("Reviewer: " + terminal_safe(request.verdict.summary()))
    what = f"{tool} `{shown_call(request.session_pattern)}`" if request.session_pattern else tool
    lines.append(f"  1) allow once   2) always allow {what} in this session   3) deny")
    return "\n".join(lines)


def decision_for(choice: str, reason: str) -> PersonDecision | None:
    """The decision a typed choice means, or None when it means nothing (asked again)."""
    choice = choice.strip().lower()
    if choice in ("1", "y", "yes", "a", "allow"):
        return PersonDecision(outcome="allow_once")
    if choice in ("2", "s", "session", "always"):
        return PersonDecision(outcome="allow_session")
    if choice in ("3", "n", "no", "d", "deny"):
        return PersonDecision(outcome="deny", reason=reason.strip() or "The person denied this call.")
    return None


def answers_for(question: Question, typed: str) -> list[str] | None:
    """Q-4 from one typed line: numbers pick choices (several, comma or space separated,
    when the question allows several); other text is a free answer when allowed. None:
    the line means nothing for this question (asked again)."""
    typed = typed.strip()
    if not typed:
        return None
    words = typed.replace(",", " ").split()
    if question.options and all(w.isdigit() for w in words):
        picks = [int(w) for w in words]
        if any(not 1 <= n <= len(question.options) for n in picks) or (len(picks) > 1 and not question.multiple):
            return None
        labels = [question.options[n - 1].label for n in picks]
        return list(dict.fromkeys(labels))
    return [typed] if question.custom or not question.options else None


class TerminalPerson:
    """Interaction (core/interaction.py) for a person at this terminal.

    ``interrupt`` is called when the person presses Ctrl-C at one of these prompts: the
    front then cancels the running turn (the prompt answers deny / dismissed)."""

    person_present = True

    def __init__(self, session: Session, interrupt: Callable[[], None]) -> None:
        self.session = session
        self.interrupt = interrupt
        self._prompt: PromptSession[str] = PromptSession()

    async def _ask(self, text: str) -> str | None:
        """One line from the person; None after Ctrl-C or Ctrl-D (the turn is cancelled)."""
        try:
            return await self._prompt.prompt_async(text, handle_sigint=False)  # the front's handler stays
        except (KeyboardInterrupt, EOFError):
            self.interrupt()
            return None

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        _say("\n" + approval_text(self.session, request, colour=colour_enabled()))
        while True:
            choice = await self._ask("choice [1/2/3]: ")
            if choice is None:
                return PersonDecision(outcome="deny", reason=INTERRUPTED)
            decision = decision_for(choice, "")
            if decision is None:
                _say("Type 1 (allow once), 2 (allow for this session) or 3 (deny).")
                continue
            if decision.outcome == "deny":
                reason = await self._ask("reason for the model (Enter for none): ")
                if reason is None:
                    return PersonDecision(outcome="deny", reason=INTERRUPTED)
                decision = decision_for(choice, reason)
            assert decision is not None
            return decision

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        """The form: each question in turn, then (Q-3) the kernel's confirmation step for
        several questions or a multi-select one: submit, back (answer again) or dismiss
        (Q-5: the call fails, the turn goes on). None: dismissed or interrupted."""
        while True:
            answers = await self._answer_each(questions)
            if answers is None or not needs_confirmation(questions):
                return answers
            _say("\n" + confirm_text(questions, answers))
            while True:
                typed = await self._ask("choice [1/2/3]: ")
                if typed is None:
                    return None
                step = typed.strip().lower()
                if step in ("1", "y", "yes", "s", "submit"):
                    return answers
                if step in ("3", "d", "dismiss"):
                    return None
                if step in ("2", "b", "back"):
                    break
                _say("Type 1 (submit), 2 (back: answer again) or 3 (dismiss).")

    async def _answer_each(self, questions: list[Question]) -> list[list[str]] | None:
        answers: list[list[str]] = []
        for question in questions:
            _say("\n" + question_text(question))
            while True:
                typed = await self._ask("answer: ")
                if typed is None:
                    return None
                picked = answers_for(question, typed)
                if picked is not None:
                    answers.append(picked)
                    break
                _say(question_hint(question))
        return answers


def confirm_text(questions: list[Question], answers: list[list[str]]) -> str:
    """Q-3's step, as the kernel's form shows it: its title, each question's answers."""
    lines = [CONFIRM_TITLE]
    lines += [terminal_safe(f"  {q.header}: {', '.join(a) if a else '(no answer)'}") for q, a in zip(questions, answers)]
    lines.append("  1) submit   2) back (answer again)   3) dismiss")
    return "\n".join(lines)


def question_text(question: Question) -> str:
    """The form of one question: header, question, numbered choices and how to answer."""
    lines = [terminal_safe(f"{question.header}: {question.question}")]
    lines += [terminal_safe(f"  {n}) {o.label}" + (f" — {o.description}" if o.description else ""))
              for n, o in enumerate(question.options, start=1)]
    lines.append(question_hint(question))
    return "\n".join(lines)


def question_hint(question: Question) -> str:
    if not question.options:
        return "(type your answer)"
    how = "one or more numbers, e.g. 1 3" if question.multiple else "a number"
    return f"({how}{' or your own answer' if question.custom else ''})"


def _say(text: str) -> None:
    """Crystal's own text (already made safe where it quotes others) on the terminal."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
