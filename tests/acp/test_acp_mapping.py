"""The pure ACP mappings: prompt blocks, question forms and answers, permission options,
proposed diffs (with the tools' access checks), tool kinds and titles."""

from __future__ import annotations

import base64

from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from crystal_kernel.acp.interaction import answers_from, decision_from, permission_options, question_schema
from crystal_kernel.acp.mapping import (
    MAX_EMBEDDED_CHARS,
    diff_content,
    prompt_parts,
    proposed_change,
    tool_kind,
    tool_title,
)
from crystal_kernel.core.interaction import ApprovalRequest, Question, QuestionOption
from crystal_kernel.core.messages import ImagePart, TextPart
from crystal_kernel.core.tool_types import FileChange
from crystal_kernel.host.bootstrap import SessionOptions, open_session

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def test_prompt_blocks_become_parts():
    blocks = [
        TextContentBlock(type="text", text="Look at this"),
        ResourceContentBlock(type="resource_link", uri="file:///home/me/proj/data%20set.csv", name="data set.csv"),
        ImageContentBlock(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
            uri="file:///home/me/proj/a.py", text="x" * (MAX_EMBEDDED_CHARS + 10))),
    ]
    parts = prompt_parts(blocks, images_ok=True)
    assert isinstance(parts[0], TextPart)
    assert parts[0].text.startswith("Look at this\n\n[The person attached /home/me/proj/data set.csv;")
    assert isinstance(parts[1], ImagePart) and parts[1].mime_type == "image/png" and parts[1].data == PNG
    assert parts[2].text.startswith('<attachment path="/home/me/proj/a.py">')
    assert "[... cut: 10 characters more]" in parts[2].text
    no_images = prompt_parts(blocks[2:3], images_ok=False)
    assert no_images == [TextPart(text="[The person attached an image, but this model cannot accept images.]")]


def test_question_form_and_answers_follow_q1_and_q4():
    questions = [
        Question(header="DB", question="Which database?", options=[QuestionOption(label="Postgres"),
                                                                    QuestionOption(label="SQLite")]),
        Question(header="Parts", question="Which parts?", multiple=True, custom=False,
                 options=[QuestionOption(label="api", description="the server"), QuestionOption(label="ui")]),
        Question(header="Name", question="Project name?", options=[]),
    ]
    schema = question_schema(questions)
    props = schema["properties"]
    assert list(props) == ["q1", "q1__other", "q2", "q3"]
    assert props["q2"]["type"] == "array"
    assert props["q2"]["items"]["anyOf"][0] == {"const": "api", "title": "api", "description": "the server"}
    assert schema["required"] == ["q3"]
    answers = answers_from(questions, {"q1": "SQLite", "q1__other": " with WAL ", "q2": ["api", "ui"], "q3": "atlas"})
    assert answers == [["SQLite", "with WAL"], ["api", "ui"], ["atlas"]]
    assert answers_from(questions, {}) == [[], [], []]


def test_permission_options_and_outcomes():
    request = ApprovalRequest(call_id="c", tool="bash", arguments={"command": "pytest"}, risk="execute",
                              authority="workspace", session_pattern="pytest")
    options = permission_options(request)
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow_once", "allow_once"), ("allow_session", "allow_always"), ("reject", "reject_once")]
    assert options[1].name == "Always allow bash `pytest` in this session"

    class Outcome:
        def __init__(self, outcome, option_id=None):
            self.outcome, self.option_id = outcome, option_id

    class Response:
        def __init__(self, outcome):
            self.outcome = outcome

    assert decision_from(Response(Outcome("selected", "allow_session"))).outcome == "allow_session"
    assert decision_from(Response(Outcome("selected", "reject"))).outcome == "deny"
    assert decision_from(Response(Outcome("cancelled"))).outcome == "deny"


def test_proposed_diffs_use_the_tools_access_checks(workspace, private_home):
    session = open_session(SessionOptions(workspace, overrides={"provider": "replay"}, person_present=True))
    (workspace / "a.txt").write_text("one\ntwo\n")
    edit = proposed_change(session, "edit", {"path": "a.txt", "old_string": "two", "new_string": "2"})
    assert edit == FileChange(path=str(workspace / "a.txt"), old_text="one\ntwo\n", new_text="one\n2\n")
    created = proposed_change(session, "write", {"path": "new/b.txt", "content": "hi"})
    assert created is not None and created.old_text is None and created.new_text == "hi"
    # Not applicable, outside the workspace, or a credential file: no preview at all.
    assert proposed_change(session, "edit", {"path": "a.txt", "old_string": "zzz", "new_string": "y"}) is None
    outside = private_home.parent / "elsewhere.txt"
    outside.write_text("secret")
    assert proposed_change(session, "write", {"path": str(outside), "content": "x"}) is None
    (workspace / ".env").write_text("KEY=1")
    assert proposed_change(session, "write", {"path": ".env", "content": "x"}) is None
    assert diff_content(FileChange(path="/p", old_text="a" * 600_000, new_text="b" * 600_000)) is None


def test_kinds_and_titles():
    assert [tool_kind(n) for n in ("read", "grep", "edit", "bash", "todowrite", "my_exec_tool")] == [
        "read", "search", "edit", "execute", "think", "other"]
    assert tool_title("bash", {"command": "pytest   -q\n--lf"}) == "bash: pytest -q --lf"
    assert tool_title("read", {"path": "src/app.py"}) == "read: src/app.py"
    assert len(tool_title("bash", {"command": "x" * 500})) < 100
