"""question (Q-1, Q-4, Q-5): validation, answers as a JSON array of label arrays, a
dismissed form is a failed result. The front is a small real Interaction that answers
from a script (the widget form belongs to the kernel's tests)."""

from __future__ import annotations

import json

from crystal_kernel.core.interaction import PersonDecision, Question
from crystal_kernel.tools.base import ToolContext
from crystal_kernel.tools.question import DISMISSED
from tests.tools.conftest import call


class ScriptedPerson:
    person_present = True

    def __init__(self, answers):
        self.answers = answers
        self.asked: list[list[Question]] = []

    async def ask_questions(self, questions):
        self.asked.append(questions)
        return self.answers

    async def ask_approval(self, request):
        return PersonDecision(outcome="deny")


Q1 = {"header": "Database", "question": "Which database?",
      "options": [{"label": "PostgreSQL", "description": "Recommended"}, {"label": "SQLite"}]}
Q2 = {"header": "Extras", "question": "Which extras?", "multiple": True,
      "options": [{"label": "Logging"}, {"label": "Metrics"}]}


def with_person(ctx: ToolContext, answers) -> ScriptedPerson:
    person = ScriptedPerson(answers)
    ctx.interaction = person  # type: ignore[assignment]
    return person


async def test_answers_in_question_order(ctx):
    person = with_person(ctx, [["PostgreSQL"], ["Logging", "Metrics"]])
    result = await call("question", ctx, questions=[Q1, Q2])
    assert result.ok
    assert json.loads(result.text) == [["PostgreSQL"], ["Logging", "Metrics"]]
    asked = person.asked[0]
    assert [q.header for q in asked] == ["Database", "Extras"]
    assert asked[0].custom is True and asked[1].multiple is True


async def test_custom_text_counts_as_label(ctx):
    with_person(ctx, [["MariaDB, actually"]])
    result = await call("question", ctx, questions=[Q1])
    assert json.loads(result.text) == [["MariaDB, actually"]]


async def test_dismissed_is_failed_result(ctx):
    with_person(ctx, None)
    result = await call("question", ctx, questions=[Q1])
    assert not result.ok and result.text == DISMISSED == "The person dismissed the questions."


async def test_no_person(ctx):
    result = await call("question", ctx, questions=[Q1])
    assert not result.ok and "No person is present" in result.text


async def test_validation(ctx):
    person = with_person(ctx, [["x"]])
    cases = {
        "Give at least one question.": [],
        "labels must be unique": [{**Q1, "options": [{"label": "A"}, {"label": "A"}]}],
        "empty label": [{**Q1, "options": [{"label": " "}]}],
        "no options and does not allow a free-text answer": [{**Q1, "options": [], "custom": False}],
        "no question text": [{**Q1, "question": " "}],
        "no header": [{**Q1, "header": ""}],
    }
    for message, questions in cases.items():
        result = await call("question", ctx, questions=questions)
        assert not result.ok and message in result.text, message
    result = await call("question", ctx, questions=[{"question": "no header field"}])
    assert not result.ok and result.text.startswith("Invalid arguments for question")
    assert person.asked == []
