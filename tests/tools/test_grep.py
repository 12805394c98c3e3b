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


def _notebook(*sources: str) -> str:
    """A notebook as nbformat writes it (``"cells": [`` on its own line)."""
    import json

    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
             for s in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


async def test_one_walk_finds_the_matches_and_the_notebooks(ctx, workspace: Path, tmp_path: Path, monkeypatch):
    """The search's own walk lists the notebooks (grep.NOTEBOOK_KEY): no second rg walk
    of the tree (``rg --files``), which cost the few-matches search ~30% more CPU on
    50,000 files (docs/benchmarks.md). Here an rg that refuses to list
    files: the notebook's cell is still found, and in a file found by the search."""
    from crystal_kernel.tools import _notebook_search, _rg

    wrapper = tmp_path / "rg"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --files ] && exit 2; done\nexec {rg_binary()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(_rg, "rg_binary", lambda: str(wrapper))
    monkeypatch.setattr(_notebook_search, "rg_binary", lambda: str(wrapper))
    (workspace / "sub").mkdir()
    # In the JSON the quote is escaped: only the cell source matches the pattern.
    (workspace / "sub" / "nb.ipynb").write_text(_notebook('x = 1\nprint("needle")'))
    (workspace / "notes.txt").write_text('print("needle")\n')
    result = await call("grep", ctx, pattern='print\\("needle')
    assert result.ok, result.text
    assert result.text == 'notes.txt:\n1:print("needle")\n\nsub/nb.ipynb:\ncell 1 line 2: print("needle")'


async def test_a_file_holding_the_notebook_key_shows_only_the_patterns_matches(ctx, workspace: Path):
    """Other files can hold the key the search matches to find notebooks (a test's
    fixture, ``"cells": []``): their lines that match only the key are not shown or
    counted, with context, with ignore_case and past the kept lines."""
    (workspace / "fixture.py").write_text('a = 1\nnb = {"cells": []}\nb = 2\nneedle = 3\nc = 4\n'
                                          'NB = {"CELLS": []}\n')
    (workspace / "nb.ipynb").write_text(_notebook("needle = 5"))
    result = await call("grep", ctx, pattern="needle", context=1)
    assert result.text == "fixture.py:\n3-b = 2\n4:needle = 3\n5-c = 4\n\nnb.ipynb:\ncell 1 line 1: needle = 5"
    result = await call("grep", ctx, pattern="NEEDLE", ignore_case=True)
    assert result.text == "fixture.py:\n4:needle = 3\n\nnb.ipynb:\ncell 1 line 1: needle = 5"
    # The pattern may match the key itself: those lines are real matches.
    result = await call("grep", ctx, pattern='"cells"')
    assert result.text == 'fixture.py:\n2:nb = {"cells": []}'
    none = await call("grep", ctx, pattern="nothing here")
    assert none.text == "No matches for /nothing here/ in .."


async def test_totals_stay_exact_for_files_holding_the_notebook_key(ctx, workspace: Path):
    """Past the kept lines a file is only counted: a file whose lines match the key is
    counted by the pattern alone too."""
    from crystal_kernel.tools.grep import STORE_LINES

    per_file = STORE_LINES // 2 + 7
    for n in range(3):
        (workspace / f"big{n}.txt").write_text("".join(f"hit {i}\n" for i in range(per_file)) +
                                               '{"cells": 1}\n' * 50)
    result = await call("grep", ctx, pattern="^hit")
    assert f"[{3 * per_file} matches in 3 files; {3 * per_file - 100} more matches" in result.text, result.text[-300:]


async def test_notebooks_do_not_take_the_kept_lines(ctx, workspace: Path, monkeypatch):
    """A notebook's lines in the search's listing are not kept (it is searched by its
    cells): many notebooks leave the other files' lines shown."""
    from crystal_kernel.tools import grep as grep_module

    monkeypatch.setattr(grep_module, "STORE_LINES", 3)
    for n in range(40):
        (workspace / f"nb{n}.ipynb").write_text(_notebook("x = 1"))
    (workspace / "sub" / "deeper").mkdir(parents=True)  # walked after the notebooks beside it
    (workspace / "sub" / "deeper" / "a.txt").write_text("needle one\nneedle two\n")
    result = await call("grep", ctx, pattern="needle")
    assert result.text == "sub/deeper/a.txt:\n1:needle one\n2:needle two"


async def test_an_invalid_pattern_is_named_alone(ctx, workspace: Path):
    """rg joins the pattern with the notebook key: the error shows the pattern only."""
    (workspace / "a.txt").write_text("x\n")
    result = await call("grep", ctx, pattern="fo[o")
    assert not result.ok and result.text.startswith("Invalid regular expression"), result.text
    assert "cells" not in result.text and "fo[o" in result.text
