"""The question tool (SPEC Q-1..Q-5): ask the person structured questions and wait.

The form itself is the front's job (``ctx.interaction.ask_questions``); this tool
validates the questions and formats the answers.
"""

from __future__ import annotations

import json

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import Question
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult

MAX_QUESTIONS = 10
MAX_OPTIONS = 20
DISMISSED = "The person dismissed the questions."


class QuestionInput(ToolInput):
    questions: list[Question] = Field(description="In the order shown.")


def check_questions(questions: list[Question]) -> None:
    """Refuse question sets no person could answer; one clear line each."""
    if not questions:
        raise ToolError("Give at least one question.")
    if len(questions) > MAX_QUESTIONS:
        raise ToolError(f"{len(questions)} questions is too many; ask at most {MAX_QUESTIONS} at once.")
    for n, q in enumerate(questions, start=1):
        if not q.question.strip():
            raise ToolError(f"Question {n} has no question text.")
        if not q.header.strip():
            raise ToolError(f"Question {n} has no header.")
        if len(q.options) > MAX_OPTIONS:
            raise ToolError(f"Question {n} has {len(q.options)} options; offer at most {MAX_OPTIONS}.")
        labels = [o.label.strip() for o in q.options]
        if any(not label for label in labels):
            raise ToolError(f"Question {n} has an option with an empty label.")
        seen: set[str] = set()
        for label in labels:
            if label in seen:
                raise ToolError(f"Question {n} has two options labelled '{label}'; labels must be unique.")
            seen.add(label)
        if not q.options and not q.custom:
            raise ToolError(f"Question {n} has no options and does not allow a free-text answer.")


class QuestionTool(Tool[QuestionInput]):
    name = "question"
    Input = QuestionInput
    risk = Risk.READ

    async def run(self, args: QuestionInput, ctx: ToolContext) -> ToolResult:
        check_questions(args.questions)
        if not getattr(ctx.interaction, "person_present", True):
            raise ToolError("No person is present to answer questions; go on with a safe default or stop and say why.")
        answers = await ctx.interaction.ask_questions(args.questions)
        if answers is None:
            return ToolResult.fail(DISMISSED)
        # in question order, the selected labels per question (custom text counts).
        return ToolResult(ok=True, text=json.dumps([list(a) for a in answers], ensure_ascii=False))
