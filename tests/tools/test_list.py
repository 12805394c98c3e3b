"""list: one folder, folders first and marked, every entry shown, bounded."""

from __future__ import annotations

import os
from pathlib import Path

from crystal_kernel.tools import list as list_module
from tests.tools.conftest import call


async def test_lists_folders_first_marked(ctx, workspace: Path):
    (workspace / "b.txt").write_text("12345")
    (workspace / "A").mkdir()
    (workspace / ".hidden").write_text("")
    os.symlink("b.txt", workspace / "ln")
    result = await call("list", ctx)
    assert result.ok
    assert result.text.splitlines() == [
        "./ (1 folders, 3 files)", "A/", ".hidden  (0 B)", "b.txt  (5 B)", "ln -> b.txt",
    ]


async def test_subfolder_and_empty(ctx, workspace: Path):
    (workspace / "d").mkdir()
    result = await call("list", ctx, path="d")
    assert result.ok and result.text == "d/ is empty."


async def test_refusals(ctx, workspace: Path, tmp_path: Path):
    (workspace / "f.txt").write_text("x")
    assert "is a file" in (await call("list", ctx, path="f.txt")).text
    assert "does not exist" in (await call("list", ctx, path="nope")).text
    for path in ("..", str(tmp_path)):
        result = await call("list", ctx, path=path)
        assert not result.ok and "outside the workspace" in result.text
    (workspace / ".ssh").mkdir()
    result = await call("list", ctx, path=".ssh")
    assert not result.ok and "credential location" in result.text


async def test_bounded(ctx, workspace: Path, monkeypatch):
    monkeypatch.setattr(list_module, "MAX_ENTRIES", 10)
    for i in range(25):
        (workspace / f"f{i:02d}").write_text("")
    result = await call("list", ctx)
    assert "[... 15 more entries not shown]" in result.text
    ctx.config.tool_output_limit = 50
    monkeypatch.setattr(list_module, "MAX_ENTRIES", 1000)
    assert "characters cut" in (await call("list", ctx)).text
