"""tree: gitignore-aware outline, depth, bounded entries."""

from __future__ import annotations

from pathlib import Path

from crystal_kernel.tools import tree as tree_module
from tests.tools.conftest import call
from tests.tools.test_grep import make_tree


async def test_outline(ctx, workspace: Path):
    make_tree(workspace)
    result = await call("tree", ctx)
    assert result.ok
    assert result.text.splitlines() == [
        "./",
        "  bin.dat",
        "  crlf.txt",
        "  docs/",
        "    guide.md",
        "  logs/",
        "    keep.log",
        "  src/",
        "    app.py",
        "    deep/",
        "      nested/",
        "    util.py",
        "  sub/",
        "    y.py",
        "  unicode.txt",
    ]


async def test_depth_and_subfolder(ctx, workspace: Path):
    make_tree(workspace)
    result = await call("tree", ctx, path="src", depth=1)
    assert result.text.splitlines() == ["src/", "  app.py", "  deep/", "  util.py"]
    result = await call("tree", ctx, path="src", depth=5)
    assert "      mod.py" in result.text


async def test_bounded(ctx, workspace: Path, monkeypatch):
    monkeypatch.setattr(tree_module, "MAX_ENTRIES", 5)
    for i in range(12):
        (workspace / f"f{i:02d}").write_text("")
    result = await call("tree", ctx)
    assert "[... 7 more entries not shown" in result.text
    ctx.config.tool_output_limit = 20
    monkeypatch.setattr(tree_module, "MAX_ENTRIES", 500)
    assert "characters cut" in (await call("tree", ctx)).text


async def test_refusals(ctx, workspace: Path, tmp_path: Path):
    (workspace / "f.txt").write_text("x")
    assert "is a file" in (await call("tree", ctx, path="f.txt")).text
    assert "does not exist" in (await call("tree", ctx, path="nope")).text
    for path in ("../", str(tmp_path)):
        result = await call("tree", ctx, path=path)
        assert not result.ok and "outside the workspace" in result.text
    assert not (await call("tree", ctx, depth=0)).ok


async def test_empty(ctx, workspace: Path):
    result = await call("tree", ctx)
    assert result.ok and "has no entries" in result.text
