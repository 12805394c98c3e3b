"""write: create with folders, overwrite with a diff, refusals (access, read-only, folder)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.tools.conftest import call


async def test_creates_file_and_folders(ctx, workspace: Path):
    result = await call("write", ctx, path="a/b/c.txt", content="hello\nworld\n")
    assert result.ok and result.display == "diff"
    assert (workspace / "a/b/c.txt").read_text() == "hello\nworld\n"
    # The model gets one line: the content is what it just sent (every later request
    # would carry it twice); the person's card shows the new file as a diff.
    assert result.text == "Created a/b/c.txt (2 lines, 12 bytes)."
    assert result.shown_text.startswith("Created a/b/c.txt (2 lines, 12 bytes).")
    assert "--- /dev/null" in result.shown_text and "+++ b/a/b/c.txt" in result.shown_text
    assert "+hello" in result.shown_text


async def test_overwrite_returns_unified_diff(ctx, workspace: Path):
    (workspace / "f.py").write_text("x = 1\ny = 2\n")
    result = await call("write", ctx, path="f.py", content="x = 1\ny = 3\n")
    assert result.ok and result.display == "diff"
    assert "--- a/f.py" in result.text and "+++ b/f.py" in result.text
    assert "-y = 2" in result.text and "+y = 3" in result.text
    assert (workspace / "f.py").read_text() == "x = 1\ny = 3\n"


async def test_same_content_changes_nothing(ctx, workspace: Path):
    (workspace / "f.txt").write_text("same\n")
    result = await call("write", ctx, path="f.txt", content="same\n")
    assert result.ok and "nothing changed" in result.text


async def test_keeps_file_mode(ctx, workspace: Path):
    script = workspace / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o755)
    await call("write", ctx, path="run.sh", content="echo 2\n")
    assert os.stat(script).st_mode & 0o777 == 0o755


async def test_refuses_folder_target(ctx, workspace: Path):
    (workspace / "d").mkdir()
    result = await call("write", ctx, path="d", content="x")
    assert not result.ok and "is a folder" in result.text


async def test_refuses_parent_that_is_a_file(ctx, workspace: Path):
    (workspace / "f").write_text("x")
    result = await call("write", ctx, path="f/g.txt", content="x")
    assert not result.ok and "is a file, not a folder" in result.text
    assert (workspace / "f").read_text() == "x"


async def test_refuses_escape_and_outside(ctx, workspace: Path):
    result = await call("write", ctx, path="../evil.txt", content="x")
    assert not result.ok and "outside the workspace" in result.text
    assert not (workspace.parent / "evil.txt").exists()
    result = await call("write", ctx, path="/tmp/crystal-evil-test.txt", content="x")
    assert not result.ok and not Path("/tmp/crystal-evil-test.txt").exists()


async def test_refuses_symlink_pointing_outside(ctx, workspace: Path):
    target = workspace.parent / "t.txt"
    target.write_text("orig")
    os.symlink(target, workspace / "link.txt")
    result = await call("write", ctx, path="link.txt", content="changed")
    assert not result.ok and "outside the workspace" in result.text
    assert target.read_text() == "orig"


async def test_refuses_read_only_added_directory(ctx, tmp_path: Path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ctx.access.add(ro, "ro")
    result = await call("write", ctx, path=str(ro / "x.txt"), content="x")
    assert not result.ok and "read-only directory" in result.text
    assert not (ro / "x.txt").exists()


async def test_writes_read_write_added_directory(ctx, tmp_path: Path):
    rw = tmp_path / "rw"
    rw.mkdir()
    ctx.access.add(rw, "rw")
    result = await call("write", ctx, path=str(rw / "x.txt"), content="x")
    assert result.ok and (rw / "x.txt").read_text() == "x"


async def test_refuses_credentials(ctx, workspace: Path):
    for path in (".env", "keys/id_rsa", ".aws/credentials", "server.pem"):
        result = await call("write", ctx, path=path, content="x")
        assert not result.ok and "credential location" in result.text, path
        assert not (workspace / path).exists()


async def test_diff_truncated_to_tool_output_limit(ctx, workspace: Path):
    ctx.config.tool_output_limit = 500
    result = await call("write", ctx, path="big.txt", content="line\n" * 1000)
    assert result.ok and "characters cut" in result.shown_text and len(result.shown_text) < 1000
    assert (workspace / "big.txt").read_text() == "line\n" * 1000
    (workspace / "big.txt").write_text("old\n" * 1000)
    result = await call("write", ctx, path="big.txt", content="line\n" * 1000)
    assert result.ok and "characters cut" in result.text and result.shown_text is None
