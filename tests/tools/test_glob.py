"""glob: newest first, gitignore-aware, bounded; rg listing and the Python walk agree."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crystal_kernel.tools.glob import glob_files
from tests.tools.conftest import call
from tests.tools.test_grep import make_tree


async def test_newest_first(ctx, workspace: Path):
    now = time.time()
    for i, name in enumerate(["old.py", "mid.py", "new.py"]):
        p = workspace / name
        p.write_text("x")
        os.utime(p, (now - 100 + i * 10, now - 100 + i * 10))
    result = await call("glob", ctx, pattern="*.py")
    assert result.ok and result.text.splitlines() == ["new.py", "mid.py", "old.py"]


@pytest.mark.parametrize("pattern", ["**/*.py", "*.py", "src/*.py", "src/**/*.py", "*.{md,txt}", "*.log",
                                     "sub/*", "**/nested/*", "?rlf.txt", "[su]*/*.py", "**/app.py",
                                     "*pp.py", "**/keep.log", "src/**/mod.py", "*.pem", "**/.gitignore"])
async def test_rg_listing_equals_python_walk(workspace: Path, pattern: str):
    make_tree(workspace)
    assert await glob_files(workspace, pattern) == await glob_files(workspace, pattern, use_rg=False)


async def test_pattern_semantics(ctx, workspace: Path):
    make_tree(workspace)
    names = lambda r: sorted(r.text.splitlines())  # noqa: E731
    assert names(await call("glob", ctx, pattern="src/*.py")) == ["src/app.py", "src/util.py"]
    assert names(await call("glob", ctx, pattern="**/mod.py")) == ["src/deep/nested/mod.py"]
    assert names(await call("glob", ctx, pattern="*.log")) == ["logs/keep.log"]
    assert names(await call("glob", ctx, pattern="*.py", path="src/deep")) == ["src/deep/nested/mod.py"]


async def test_ignored_hidden_credentials_left_out(ctx, workspace: Path):
    make_tree(workspace)
    result = await call("glob", ctx, pattern="**/*")
    for hidden in ("build/out.py", "logs/a.log", ".hidden", "server.pem", "sub/x.tmp", ".gitignore"):
        assert hidden not in result.text.splitlines(), hidden
    assert "src/app.py" in result.text.splitlines()


async def test_bounded_with_count(ctx, workspace: Path):
    for i in range(150):
        (workspace / f"f{i:03d}.txt").write_text("x")
    result = await call("glob", ctx, pattern="*.txt")
    assert len([line for line in result.text.splitlines() if line.endswith(".txt")]) == 100
    assert "[150 files match; the newest 100 are shown and 50 more are not." in result.text


async def test_no_match_and_refusals(ctx, workspace: Path, tmp_path: Path):
    (workspace / "f.txt").write_text("x")
    result = await call("glob", ctx, pattern="*.rs")
    assert result.ok and result.text == "No files match '*.rs' in .."
    assert not (await call("glob", ctx, pattern="  ")).ok
    result = await call("glob", ctx, pattern="*", path="f.txt")
    assert not result.ok and "not a folder" in result.text
    for path in ("..", str(tmp_path)):
        result = await call("glob", ctx, pattern="*", path=path)
        assert not result.ok and "outside the workspace" in result.text


async def test_output_truncated(ctx, workspace: Path):
    ctx.config.tool_output_limit = 200
    for i in range(50):
        (workspace / f"file_with_a_long_name_{i:03d}.txt").write_text("x")
    result = await call("glob", ctx, pattern="*.txt")
    assert "characters cut" in result.text


async def test_a_nul_in_the_pattern_matches_nothing(ctx, workspace: Path):
    # ROBUST-1: no argv carries a NUL, so the pattern's suffix is not handed to rg as a
    # file type (which failed with "embedded null byte", found by tests/reliability/test_fuzz.py).
    (workspace / "a.txt").write_text("x")
    result = await call("glob", ctx, pattern="a.txt\x00")
    assert result.ok and result.text.startswith("No files match")
