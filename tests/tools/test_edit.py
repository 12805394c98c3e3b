"""edit: exact replacement with a diff; refusals say which (missing, not unique, ...)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.core.messages import ToolCallPart
from crystal_kernel.host.approval_flow import decide, preview_of
from crystal_kernel.tools.catalog import load_builtin
from tests.tools.conftest import call


async def test_replaces_unique_text_and_returns_diff(ctx, workspace: Path):
    (workspace / "m.py").write_text("def f():\n    return 1\n")
    result = await call("edit", ctx, path="m.py", old_string="return 1", new_string="return 2")
    assert result.ok and result.display == "diff"
    assert (workspace / "m.py").read_text() == "def f():\n    return 2\n"
    assert result.text.startswith("Edited m.py: replaced 1 occurrence.")
    assert "-    return 1" in result.text and "+    return 2" in result.text


async def test_missing_old_string_refused(ctx, workspace: Path):
    (workspace / "m.py").write_text("a = 1\n")
    result = await call("edit", ctx, path="m.py", old_string="b = 1", new_string="b = 2")
    assert not result.ok and result.text.startswith("old_string was not found in 'm.py'")
    assert (workspace / "m.py").read_text() == "a = 1\n"


async def test_not_unique_refused_with_count(ctx, workspace: Path):
    (workspace / "m.py").write_text("x\nx\nx\n")
    result = await call("edit", ctx, path="m.py", old_string="x", new_string="y")
    assert not result.ok and "occurs 3 times in 'm.py'" in result.text and "replace_all" in result.text
    assert (workspace / "m.py").read_text() == "x\nx\nx\n"


async def test_replace_all(ctx, workspace: Path):
    (workspace / "m.py").write_text("x\nx\nx\n")
    result = await call("edit", ctx, path="m.py", old_string="x", new_string="y", replace_all=True)
    assert result.ok and "replaced 3 occurrences" in result.text
    assert (workspace / "m.py").read_text() == "y\ny\ny\n"


async def test_crlf_preserved(ctx, workspace: Path):
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await call("edit", ctx, path="w.txt", old_string="two", new_string="2")
    assert result.ok and (workspace / "w.txt").read_bytes() == b"one\r\n2\r\n"


async def test_missing_file_refused(ctx):
    result = await call("edit", ctx, path="no.py", old_string="a", new_string="b")
    assert not result.ok and "does not exist; use write" in result.text


async def test_empty_and_identical_refused(ctx, workspace: Path):
    (workspace / "m.py").write_text("a\n")
    r1 = await call("edit", ctx, path="m.py", old_string="", new_string="b")
    r2 = await call("edit", ctx, path="m.py", old_string="a", new_string="a")
    assert not r1.ok and "old_string is empty" in r1.text
    assert not r2.ok and "are the same" in r2.text


async def test_binary_and_folder_refused(ctx, workspace: Path):
    (workspace / "b.bin").write_bytes(b"\x00\x01abc")
    (workspace / "d").mkdir()
    r1 = await call("edit", ctx, path="b.bin", old_string="abc", new_string="x")
    r2 = await call("edit", ctx, path="d", old_string="abc", new_string="x")
    assert not r1.ok and "binary file" in r1.text
    assert not r2.ok and "is a folder" in r2.text


async def test_access_refusals(ctx, workspace: Path, tmp_path: Path):
    outside = tmp_path / "o.txt"
    outside.write_text("a")
    os.symlink(outside, workspace / "ln.txt")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f.txt").write_text("a")
    ctx.access.add(ro, "ro")
    (workspace / ".env").write_text("A=1")
    cases = {
        "../o.txt": "outside the workspace",
        str(outside): "outside the workspace",
        "ln.txt": "outside the workspace",
        str(ro / "f.txt"): "read-only directory",
        ".env": "credential location",
    }
    for path, message in cases.items():
        result = await call("edit", ctx, path=path, old_string="a", new_string="b")
        assert not result.ok and message in result.text, path
    assert outside.read_text() == "a" and (ro / "f.txt").read_text() == "a"


async def test_diff_truncated(ctx, workspace: Path):
    ctx.config.tool_output_limit = 300
    (workspace / "f.txt").write_text("a\n" * 500)
    result = await call("edit", ctx, path="f.txt", old_string="a\n", new_string="b\n", replace_all=True)
    assert result.ok and "characters cut" in result.text


class _AskingPerson:
    """A person who is asked and says no; records what they were shown."""

    person_present = True

    def __init__(self) -> None:
        self.requests: list = []

    async def ask_approval(self, request):
        self.requests.append(request)
        return PersonDecision(outcome="deny", reason="not now")


async def test_approval_shows_the_diff_against_the_file_with_real_line_numbers(session, ctx, workspace: Path):
    """GUARD-4: the host computes the diff a person approves from the
    file (tools/_proposed.py), once for every front: a mid-line change at line 17 is
    ``@@ -14,7 +14,7 @@`` with three lines of context, no 'No newline' markers."""
    lines = [f"v{n} = {n}\n" for n in range(1, 31)]
    lines[16] = "total = price * qty\n"
    (workspace / "shop.py").write_text("".join(lines))
    arguments = {"path": "shop.py", "old_string": "price * qty", "new_string": "price * qty * 2"}
    tool = load_builtin("edit")
    c = tool.classify(tool.parse(arguments), ctx)
    person = _AskingPerson()
    session.approval = "default"
    decision = await decide(session, person, ToolCallPart(id="c1", name="edit", arguments=arguments), c,
                            lambda event: None)
    assert not decision.allowed
    (request,) = person.requests
    assert request.preview == (
        "--- a/shop.py\n+++ b/shop.py\n@@ -14,7 +14,7 @@\n v14 = 14\n v15 = 15\n v16 = 16\n"
        "-total = price * qty\n+total = price * qty * 2\n v18 = 18\n v19 = 19\n v20 = 20\n")
    assert (workspace / "shop.py").read_text() == "".join(lines), "a preview writes nothing"


async def test_approval_diff_for_write_and_for_an_edit_that_cannot_apply(ctx, workspace: Path):
    (workspace / "a.txt").write_text("one\ntwo")  # no newline at the end: said once, truthfully
    edit, write = load_builtin("edit"), load_builtin("write")
    missing = edit.classify(edit.parse({"path": "a.txt", "old_string": "zzz", "new_string": "y"}), ctx)
    assert await preview_of(missing) is None, "old_string not in the file: no made-up diff (the tool's error follows)"
    c = write.classify(write.parse({"path": "a.txt", "content": "one\nTWO\n"}), ctx)
    assert await preview_of(c) == ("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n"
                         "+TWO\n")
    new = write.classify(write.parse({"path": "new.txt", "content": "x\n"}), ctx)
    assert await preview_of(new) == "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n"


async def test_a_change_nobody_is_asked_about_reads_no_preview(session, ctx, workspace: Path):
    """GUARD-4, ROBUST-3: the diff a person approves is made only when a person is asked
    (it reads the file, in a worker thread); in ``full`` the host allows the write at once
    and nothing reads the file for a preview that nobody would see."""
    (workspace / "a.txt").write_text("one\n")
    write = load_builtin("write")
    arguments = {"path": "a.txt", "content": "two\n"}
    made: list[str] = []

    def make() -> str:
        made.append("preview")
        return "diff"

    c = dataclasses.replace(write.classify(write.parse(arguments), ctx), make_preview=make)
    assert c.preview is None
    session.approval = "full"
    person = _AskingPerson()
    decision = await decide(session, person, ToolCallPart(id="c1", name="write", arguments=arguments), c,
                            lambda event: None)
    assert decision.allowed and not person.requests and made == []
    session.approval = "default"
    decision = await decide(session, person, ToolCallPart(id="c2", name="write", arguments=arguments), c,
                            lambda event: None)
    assert not decision.allowed and made == ["preview"] and person.requests[0].preview == "diff"


async def test_a_host_owned_change_shows_the_person_its_diff(session, ctx, workspace: Path):
    """TRUST-3, GUARD-4: a change to a file that steers the host is the person's to allow
    in every mode; the form shows what would change, as for any other write."""
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    (workspace / ".crystal" / "prompts" / "work.md").write_text("Be brief.\n")
    write = load_builtin("write")
    arguments = {"path": ".crystal/prompts/work.md", "content": "Be thorough.\n"}
    c = write.classify(write.parse(arguments), ctx)
    assert c.host_owned
    session.approval = "full"
    person = _AskingPerson()
    decision = await decide(session, person, ToolCallPart(id="c1", name="write", arguments=arguments), c,
                            lambda event: None)
    assert not decision.allowed
    (request,) = person.requests
    assert request.preview == ("--- a/.crystal/prompts/work.md\n+++ b/.crystal/prompts/work.md\n@@ -1 +1 @@\n"
                               "-Be brief.\n+Be thorough.\n")
