"""grep: ripgrep's results equal a plain-Python reference search over the same walk;
gitignore, hidden, binary and credential files are skipped; results are bounded with a
count; without rg the tool fails with one line (no backtracking fallback, ROBUST-3)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

import pytest

from crystal_kernel.tools._walk import rg_binary, walk
from crystal_kernel.tools.grep import FileHits, compile_glob, format_hits, grep_rg, path_allowed
from tests.tools.conftest import call, write_files


def make_tree(ws: Path) -> None:
    files = {
        "src/app.py": "import os\n\ndef main():\n    print('Hello')\n    return 0\n",
        "src/util.py": "def helper(x):\n    return x * 2\n\n\ndef other():\n    pass\n",
        "src/deep/nested/mod.py": "class Thing:\n    def method(self):\n        return 'hello world'\n",
        "docs/guide.md": "# Guide\nSay hello to main.\n",
        "build/out.py": "def main(): pass\n",
        "logs/a.log": "def main in log\n",
        "logs/keep.log": "def main kept\n",
        ".hidden/secret.py": "def main(): hidden\n",
        "server.pem": "def main key\n",
        "crlf.txt": "def main():\r\n  x\r\n",
        "unicode.txt": "héllo wörld def main\n",
        "sub/.gitignore": "*.tmp\n",
        "sub/x.tmp": "def main tmp\n",
        "sub/y.py": "def main sub\n",
        ".gitignore": "build/\n*.log\n!keep.log\n",
    }
    write_files(ws, files)
    (ws / "bin.dat").write_bytes(b"def main\x00\x01\x02")


CASES = [
    ("def ", {}),
    ("hello", {"ignore_case": True}),
    ("hello", {}),
    ("def main", {"context": 1}),
    (r"return \w+", {"context": 2}),
    ("def", {"glob": "*.py"}),
    ("def", {"glob": "src/**/*.py"}),
    ("def", {"glob": "*.{md,txt}"}),
    ("w.rld", {}),
    ("^class", {}),
    ("nomatchatall", {}),
]


def reference_grep(pattern: str, root: Path, *, ignore_case: bool, context: int, glob_re) -> list[FileHits]:
    """What rg must find, computed in plain Python over the shared walk (test oracle only:
    the tool itself never runs the model's pattern through Python's re)."""
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    out = []
    for path, _, _ in walk(root):
        if not path_allowed(path, root, glob_re):
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        found = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
        if not found:
            continue
        entry = FileHits(str(path), matches=len(found))
        wanted: set[int] = set()
        for i in found:
            wanted.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        entry.lines = [(i + 1, i in found, lines[i].rstrip("\r")) for i in sorted(wanted)]
        out.append(entry)
    return out


@pytest.mark.parametrize("pattern,options", CASES)
async def test_rg_gives_the_reference_output(workspace: Path, pattern, options):
    make_tree(workspace)
    assert rg_binary(), "the ripgrep package ships rg next to the interpreter"
    kwargs = dict(ignore_case=options.get("ignore_case", False), context=options.get("context", 0),
                  glob_re=compile_glob(options.get("glob")))
    a = await grep_rg(rg_binary(), pattern, workspace, **kwargs)
    b = reference_grep(pattern, workspace, **kwargs)
    assert format_hits(a, workspace, 10**6) == format_hits(b, workspace, 10**6)


async def test_happy_path_output(ctx, workspace: Path):
    make_tree(workspace)
    result = await call("grep", ctx, pattern="def main")
    assert result.ok
    assert "src/app.py:\n3:def main():" in result.text
    assert "sub/y.py:\n1:def main sub" in result.text
    assert "logs/keep.log:\n1:def main kept" in result.text
    for hidden in ("build/out.py", "logs/a.log", ".hidden", "server.pem", "bin.dat", "x.tmp"):
        assert hidden not in result.text, hidden


async def test_context_and_separators(ctx, workspace: Path):
    (workspace / "f.txt").write_text("a\nmatch\nb\nc\nd\ne\nmatch\nf\n")
    result = await call("grep", ctx, pattern="match", context=1)
    assert result.text == "f.txt:\n1-a\n2:match\n3-b\n--\n6-e\n7:match\n8-f"


async def test_single_file_and_path(ctx, workspace: Path):
    make_tree(workspace)
    result = await call("grep", ctx, pattern="def", path="src/util.py")
    assert result.ok and result.text.startswith("src/util.py:\n1:def helper(x):")
    result = await call("grep", ctx, pattern="def", path="src/deep")
    assert "src/deep/nested/mod.py" in result.text and "app.py" not in result.text


async def test_no_match(ctx, workspace: Path):
    (workspace / "a.txt").write_text("x\n")
    result = await call("grep", ctx, pattern="zzz")
    assert result.ok and result.text == "No matches for /zzz/ in .."


async def test_invalid_regex_refused(ctx, workspace: Path):
    (workspace / "a.txt").write_text("x\n")
    result = await call("grep", ctx, pattern="(unclosed")
    assert not result.ok and result.text.startswith("Invalid regular expression")


async def test_without_rg_one_clear_line_and_no_python_search(ctx, workspace: Path, monkeypatch):
    """ROBUST-3: no fallback to Python's backtracking re; a missing rg is one line."""
    from crystal_kernel.tools import _rg

    make_tree(workspace)
    monkeypatch.setattr(_rg, "rg_binary", lambda: None)
    result = await call("grep", ctx, pattern="def main", context=1)
    assert not result.ok
    assert result.text == ("grep needs ripgrep (the rg program that Crystal's 'ripgrep' package installs) and "
                           "it was not found; reinstall Crystal or put rg on PATH.")


async def test_results_bounded_with_count(ctx, workspace: Path):
    for i in range(30):
        (workspace / f"f{i:02d}.txt").write_text("hit\n" * 10)
    result = await call("grep", ctx, pattern="hit")
    assert result.text.count(":hit") == 100
    assert "[300 matches in 30 files; 200 more matches (in 20 files) are not shown." in result.text


async def test_long_lines_cut_and_output_limit(ctx, workspace: Path):
    (workspace / "long.txt").write_text(("x" * 2000 + "\n") * 50)
    ctx.config.tool_output_limit = 3000
    result = await call("grep", ctx, pattern="x")
    assert "[... line cut]" in result.text and "characters cut" in result.text


async def test_access_refusals(ctx, workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("secret\n")
    os.symlink(outside, workspace / "link")
    for path in ("..", str(outside), "link"):
        result = await call("grep", ctx, pattern="secret", path=path)
        assert not result.ok and "outside the workspace" in result.text, path
    (workspace / ".env").write_text("secret\n")
    result = await call("grep", ctx, pattern="secret", path=".env")
    assert not result.ok and "credential location" in result.text
    # A symlink inside the workspace is not followed by a folder search.
    result = await call("grep", ctx, pattern="secret")
    assert result.ok and result.text.startswith("No matches")


async def test_binary_file_refused(ctx, workspace: Path):
    (workspace / "b.bin").write_bytes(b"a\x00b")
    result = await call("grep", ctx, pattern="a", path="b.bin")
    assert not result.ok and "binary file" in result.text


async def test_many_matches_are_counted_exactly_while_only_the_first_lines_are_read(ctx, workspace: Path):
    """Past the lines that can be shown only counts are kept (ROBUST-3 bounds), from the
    same rg run: totals stay exact past STORE_LINES."""
    from crystal_kernel.tools.grep import STORE_LINES

    per_file = STORE_LINES // 2 + 7
    for n in range(3):
        (workspace / f"big{n}.txt").write_text("".join(f"hit {i}\n" for i in range(per_file)) + "miss\n")
    result = await call("grep", ctx, pattern="^hit")
    assert result.ok
    assert f"[{3 * per_file} matches in 3 files; {3 * per_file - 100} more matches" in result.text, result.text[-300:]
    # Which file's lines rg writes first is rg's (threaded) order; each shows from line 1.
    assert re.match(r"big[012]\.txt:\n1:hit 0\n2:hit 1\n", result.text), result.text[:200]
    assert sum(1 for line in result.text.splitlines() if re.match(r"\d+:hit", line)) == 100


async def test_totals_past_the_kept_lines_count_match_lines_only_with_context(ctx, workspace: Path):
    """With context lines, the lines counted past STORE_LINES are the match lines (not
    the context lines around them nor the ``--`` separators): the totals equal
    ``rg --count``'s for the same search (ROBUST-3)."""
    from crystal_kernel.tools.grep import STORE_LINES

    per_file = STORE_LINES // 2
    for n in range(3):
        # A match every fourth line: each has context lines and groups are separated by --.
        (workspace / f"ctx{n}.txt").write_text("".join(f"{'hit' if i % 4 == 0 else 'pad'} {i}\n"
                                                       for i in range(4 * per_file)))
    result = await call("grep", ctx, pattern="^hit", context=1)
    assert result.ok
    counted = (await asyncio.to_thread(subprocess.run, [rg_binary(), "--count", "--no-filename", "^hit",
                                                        str(workspace)], capture_output=True, text=True,
                                       check=True)).stdout.split()
    total = sum(int(c) for c in counted)
    assert total == 3 * per_file
    assert f"[{total} matches in 3 files; {total - 100} more matches" in result.text, result.text[-300:]
