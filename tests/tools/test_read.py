"""read: numbered lines, windows, refusals (folders, binary, images, access), truncation."""

from __future__ import annotations

import os
from pathlib import Path

from tests.tools.conftest import call

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_reads_numbered_lines(ctx, workspace: Path):
    (workspace / "a.txt").write_text("alpha\nbeta\ngamma\n")
    result = await call("read", ctx, path="a.txt")
    assert result.ok
    assert result.text == "1\talpha\n2\tbeta\n3\tgamma"  # N<tab>text, as read.md says


async def test_offset_and_limit_window_says_how_to_continue(ctx, workspace: Path):
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await call("read", ctx, path="long.txt", offset=10, limit=5)
    assert result.ok
    lines = result.text.splitlines()
    assert lines[0] == "10\tline 10"
    assert lines[4] == "14\tline 14"
    assert "[lines 10-14 of 100; read on with offset=15]" in result.text


async def test_default_limit_is_2000_lines(ctx, workspace: Path):
    (workspace / "big.txt").write_text("x\n" * 2500)
    result = await call("read", ctx, path="big.txt")
    assert "\n2000\tx" in result.text and "\n2001\t" not in result.text
    assert "read on with offset=2001" in result.text


async def test_offset_past_end_is_refused(ctx, workspace: Path):
    (workspace / "a.txt").write_text("one\n")
    result = await call("read", ctx, path="a.txt", offset=5)
    assert not result.ok
    assert "past the end" in result.text and "1 lines" in result.text


async def test_empty_file(ctx, workspace: Path):
    (workspace / "e.txt").write_text("")
    result = await call("read", ctx, path="e.txt")
    assert result.ok and "is empty" in result.text


async def test_refuses_folder(ctx, workspace: Path):
    (workspace / "sub").mkdir()
    result = await call("read", ctx, path="sub")
    assert not result.ok
    assert result.text == "'sub' is a folder, not a file; use list or tree to see what it holds."


async def test_refuses_missing(ctx):
    result = await call("read", ctx, path="nope.txt")
    assert not result.ok and result.text == "'nope.txt' does not exist."


async def test_refuses_binary(ctx, workspace: Path):
    (workspace / "b.bin").write_bytes(b"abc\x00def" * 10)
    result = await call("read", ctx, path="b.bin")
    assert not result.ok and "binary file" in result.text


async def test_image_suggests_view_image(ctx, workspace: Path):
    (workspace / "pic.png").write_bytes(PNG)
    result = await call("read", ctx, path="pic.png")
    assert not result.ok
    assert "image/png" in result.text and "view_image" in result.text


async def test_long_lines_are_cut(ctx, workspace: Path):
    (workspace / "min.js").write_text("a" * 5000 + "\n")
    result = await call("read", ctx, path="min.js")
    assert result.ok and "line cut at 2000 characters" in result.text
    assert len(result.text) < 2200


async def test_output_truncated_to_tool_output_limit(ctx, workspace: Path):
    ctx.config.tool_output_limit = 1000
    (workspace / "w.txt").write_text("".join(f"{'y' * 50}\n" for _ in range(500)))
    result = await call("read", ctx, path="w.txt")
    assert result.ok
    assert "characters cut" in result.text and "the tool output limit is 1000" in result.text
    assert len(result.text) < 1300


async def test_refuses_parent_escape(ctx, workspace: Path):
    (workspace.parent / "secret.txt").write_text("s")
    result = await call("read", ctx, path="../secret.txt")
    assert not result.ok and "outside the workspace" in result.text


async def test_refuses_absolute_outside(ctx, workspace: Path):
    outside = workspace.parent / "out.txt"
    outside.write_text("s")
    result = await call("read", ctx, path=str(outside))
    assert not result.ok and "outside the workspace" in result.text


async def test_refuses_symlink_pointing_outside(ctx, workspace: Path):
    outside = workspace.parent / "target.txt"
    outside.write_text("s")
    os.symlink(outside, workspace / "link.txt")
    result = await call("read", ctx, path="link.txt")
    assert not result.ok and "outside the workspace" in result.text


async def test_refuses_credentials(ctx, workspace: Path):
    (workspace / ".env").write_text("KEY=1")
    (workspace / ".ssh").mkdir()
    (workspace / ".ssh" / "config").write_text("Host x")
    for path in (".env", ".ssh/config"):
        result = await call("read", ctx, path=path)
        assert not result.ok and "credential location" in result.text, path


async def test_reads_added_directory(ctx, tmp_path: Path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "n.txt").write_text("hello\n")
    ctx.access.add(extra, "ro")
    result = await call("read", ctx, path=str(extra / "n.txt"))
    assert result.ok and "hello" in result.text


async def test_bad_arguments_are_a_clear_error(ctx):
    result = await call("read", ctx, path="a", offset=0)
    assert not result.ok and result.text.startswith("Invalid arguments for read: offset")
    result = await call("read", ctx, path="a", bogus=1)
    assert not result.ok and "bogus" in result.text
