"""edit: exact replacement with a diff; refusals say which (missing, not unique, ...)."""

from __future__ import annotations

import os
from pathlib import Path

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
