"""SPEC §12 notebook tools: notebook_run with a real python3 kernel (ipykernel) started by
nbclient in a child process under the jobs supervisor."""

from __future__ import annotations

import asyncio
import os
import time

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.tools.conftest import call


def make(path, sources, kernel="python3"):
    nb = new_notebook(metadata={"kernelspec": {"name": kernel, "display_name": kernel, "language": "python"},
                                "custom_tool": {"keep": True}})
    nb.cells = [new_markdown_cell(s[3:]) if s.startswith("md:") else new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return nb


def read(path):
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    return nb


_TEST_START = [0.0]


@pytest.fixture(autouse=True)
def _note_test_start():
    # Kernels other test modules of this pytest process left running are not this test's.
    _TEST_START[0] = time.time() - 0.5
    yield


def kernels_running() -> list[psutil.Process]:
    out = []
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "ipykernel_launcher" in " ".join(proc.cmdline()) and proc.create_time() >= _TEST_START[0]:
                out.append(proc)
        except psutil.Error:
            pass
    return out


async def test_run_stops_at_the_error_reports_it_first_and_writes_outputs(workspace, ctx):
    nb = make(workspace / "a.ipynb", ["md:# Data", "rows = [3, 4, 5]\nprint(sum(rows))",
                                      "mean = sum(rows) / len(row)", "print('after')"])
    result = await call("notebook_run", ctx, path="a.ipynb", timeout_seconds=90)
    assert not result.ok
    text = result.text
    assert text.startswith("Ran a.ipynb in a fresh python3 kernel: cells 1-4, 2 code cells executed in")
    assert "Stopped at cell 3: it raised an error. Cells 4-4 did not run" in text
    failed = text.index("Failed cell:\n## cell 3 · code")
    assert text.index("→ error: NameError: name 'row' is not defined") > failed
    assert text.index("Outputs:\n## cell 2") > failed  # errors first
    assert "\x1b" not in text
    got = read(workspace / "a.ipynb")
    assert got.cells[1].outputs[0].text == "12\n" and got.cells[1].execution_count == 1
    assert got.cells[2].outputs[0].ename == "NameError"
    assert got.cells[3].outputs == [] and got.cells[3].execution_count is None
    assert got.metadata.custom_tool == {"keep": True} and [c.id for c in got.cells] == [c.id for c in nb.cells]
    assert kernels_running() == []

    fix = await call("notebook_edit", ctx, path="a.ipynb", action="replace", cell_id=nb.cells[2].id,
                     source="mean = sum(rows) / len(rows)\nmean")
    assert fix.ok
    again = await call("notebook_run", ctx, path="a.ipynb", timeout_seconds=90)
    assert again.ok, again.text
    assert "4 code cells" not in again.text and "3 code cells executed" in again.text
    assert "→ result (text/plain):\n4.0" in again.text and "→ stdout:\nafter" in again.text
    got = read(workspace / "a.ipynb")
    assert got.cells[2].outputs[0].data["text/plain"] == "4.0" and got.cells[3].outputs[0].text == "after\n"


async def test_cell_ids_run_from_the_top_through_the_last_requested_cell(workspace, ctx):
    nb = make(workspace / "b.ipynb", ["x = 2", "print(x * 21)", "print('not run')"])
    result = await call("notebook_run", ctx, path="b.ipynb", cell_ids=[nb.cells[1].id], timeout_seconds=90)
    assert result.ok, result.text
    assert "cells 1-2, 2 code cells executed" in result.text and "→ stdout:\n42" in result.text
    got = read(workspace / "b.ipynb")
    assert got.cells[2].outputs == []
    unknown = await call("notebook_run", ctx, path="b.ipynb", cell_ids=["nope"])
    assert not unknown.ok and "No cell has id 'nope'." in unknown.text


async def test_timeout_stops_the_cell_and_leaves_no_kernel(workspace, ctx):
    make(workspace / "slow.ipynb", ["print('start', flush=True)", "import time\ntime.sleep(60)", "print('never')"])
    started = time.monotonic()
    result = await call("notebook_run", ctx, path="slow.ipynb", timeout_seconds=12)
    # Well inside the hard bound (timeout + 15 s grace + the supervisor's kill grace).
    assert time.monotonic() - started < 12 + 15 + 3
    assert not result.ok
    assert "Stopped at cell 2: the time ran out (12 s)." in result.text
    assert read(workspace / "slow.ipynb").cells[0].outputs[0].text == "start\n"
    await asyncio.sleep(1)
    assert kernels_running() == []


async def test_missing_kernelspec_and_crystal_notebooks_are_refused_clearly(workspace, ctx):
    make(workspace / "r.ipynb", ["1"], kernel="no-such-kernel")
    before = (workspace / "r.ipynb").read_text()
    result = await call("notebook_run", ctx, path="r.ipynb", timeout_seconds=60)
    assert not result.ok
    assert "Cannot run 'r.ipynb': No kernel named 'no-such-kernel' is installed here (installed:" in result.text
    assert (workspace / "r.ipynb").read_text() == before
    make(workspace / "agent.ipynb", ["fix the tests"], kernel="crystal")
    crystal = await call("notebook_run", ctx, path="agent.ipynb")
    assert not crystal.ok and "is a Crystal notebook" in crystal.text


async def test_cancelling_the_call_kills_the_kernel(workspace, ctx):
    import asyncio

    make(workspace / "c.ipynb", ["import time\ntime.sleep(120)"])
    task = asyncio.ensure_future(call("notebook_run", ctx, path="c.ipynb", timeout_seconds=200))
    for _ in range(200):
        await asyncio.sleep(0.1)
        if kernels_running():
            break
    assert kernels_running(), "the kernel never started"
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(1)
    assert kernels_running() == []


async def test_crystal_magic_cells_are_skipped_inside_a_run(workspace, ctx):
    make(workspace / "m.ipynb", ["%load_ext crystal_kernel", "%%crystal\nsummarise the data", "print('after')"])
    result = await call("notebook_run", ctx, path="m.ipynb", timeout_seconds=90)
    assert result.ok, result.text
    assert "Skipped: Crystal turns do not run inside notebook_run" in result.text
    assert "→ stdout:\nafter" in result.text
    assert not (workspace / ".crystal" / "sessions").exists() or not any((workspace / ".crystal" / "sessions").iterdir())
