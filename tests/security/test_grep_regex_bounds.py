"""ROBUST-3 attack on grep's regular expressions: a model-chosen pattern that makes a
backtracking engine run for minutes (``(a+)+$``, ``(a|aa)+$``, ``(.*a){20}``) against a
line of many ``a`` and no match. ripgrep's engine is linear, and grep never hands the
pattern to Python's ``re``: not for files, not for notebook cells, and not when rg is
missing (then the tool fails with one line). Real files, the real tool, the real turn
loop.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.security.test_tool_bounds import one_result

CATASTROPHIC = [r"(a+)+$", r"(a|aa)+$", r"(.*a){20}x", r"(a*)*b"]
LINE = "a" * 40 + "!"


def plant(workspace) -> None:
    (workspace / "data.txt").write_text(f"first\n{LINE}\nlast\n")
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": ["x = 1\n", LINE + "\n", "y = 2"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (workspace / "nb.ipynb").write_text(json.dumps(notebook))


def test_python_re_really_is_catastrophic_on_this_input():
    """The attack is real: Python's re needs far longer than a second on a shorter line."""
    regex = re.compile(r"(a+)+$")
    started = time.monotonic()
    assert regex.search("a" * 22 + "!") is None
    small = time.monotonic() - started
    # Each extra "a" doubles the work; 40 of them would take days.
    assert small > 0.05, small


@pytest.mark.parametrize("pattern", CATASTROPHIC)
async def test_catastrophic_pattern_over_files_and_notebooks_returns_at_once(workspace, pattern):
    plant(workspace)
    result, took = await one_result(workspace, "grep", {"pattern": pattern})
    assert result.ok, result.text
    assert result.text == f"No matches for /{pattern}/ in ..", result.text
    assert took < 5, f"grep took {took:.1f} s on /{pattern}/"


async def test_notebook_cells_are_matched_by_ripgrep_and_still_found(workspace):
    plant(workspace)
    result, took = await one_result(workspace, "grep", {"pattern": r"^a+!$", "context": 1})
    assert result.ok and took < 5
    assert "data.txt:\n1-first\n2:" + LINE + "\n3-last" in result.text
    assert "nb.ipynb:\ncell 1 line 1- x = 1\ncell 1 line 2: " + LINE + "\ncell 1 line 3- y = 2" in result.text


async def test_without_rg_no_python_search_runs(workspace, monkeypatch):
    from crystal_kernel.tools import _rg

    plant(workspace)
    monkeypatch.setattr(_rg, "rg_binary", lambda: None)
    result, took = await one_result(workspace, "grep", {"pattern": r"(a+)+$"})
    assert not result.ok and took < 5
    assert result.text.startswith("grep needs ripgrep") and "\n" not in result.text
