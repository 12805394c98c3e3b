"""ROBUST-3: notebook_run's write-back is bounded.

Before, 70 MB of prints made a 71 MB notebook that `read` then refused, and 500 MB took
the host to 1.5 GB. Now each cell keeps at most CELL_OUTPUT_BYTES of output and a run
NOTEBOOK_OUTPUT_BYTES, cut while the outputs arrive; the notebook and the tool result
say what was cut.

Real parts: a real python3 kernel (ipykernel) run by nbclient in the real child process
under the jobs supervisor; the real `read` tool opens the result.
"""

from __future__ import annotations

import subprocess
import sys
import time

import nbformat
import psutil
from nbformat.v4 import new_code_cell, new_notebook

from crystal_kernel.tools.notebook_run import CELL_OUTPUT_BYTES, NOTEBOOK_OUTPUT_BYTES
from tests.tools.conftest import call

MB = 1 << 20


def make(path, sources):
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"}})
    nb.cells = [new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


async def test_a_cell_printing_tens_of_mb_leaves_a_bounded_notebook_read_can_open(workspace, ctx):
    make(workspace / "big.ipynb", ["for i in range(30):\n    print('x' * (1 << 20))",
                                   "print('small')",
                                   "for i in range(12):\n    print('y' * (1 << 20))"])
    result = await call("notebook_run", ctx, path="big.ipynb", timeout_seconds=120)
    assert result.ok, result.text
    assert "Output was cut to keep the notebook bounded" in result.text
    assert "the rest of cells 1, 3 was left out" in result.text
    size = (workspace / "big.ipynb").stat().st_size
    assert size < NOTEBOOK_OUTPUT_BYTES + MB, f"the notebook grew to {size} bytes"
    nb = nbformat.read(str(workspace / "big.ipynb"), as_version=4)
    first = nb.cells[0].outputs
    assert sum(len(o.get("text", "")) for o in first if o.get("name") == "stdout") <= CELL_OUTPUT_BYTES
    assert first[-1].name == "stderr" and first[-1].text.startswith("[Crystal cut the rest of this cell's output")
    assert nb.cells[1].outputs[0].text == "small\n"
    opened = await call("read", ctx, path="big.ipynb")
    assert opened.ok and "small" in opened.text


def test_the_runner_cuts_while_collecting_so_its_memory_stays_bounded(tmp_path):
    """150 MB printed: the runner process never holds it (sampled RSS), the result file
    holds at most the run's bound."""
    notebook = tmp_path / "huge.ipynb"
    make(notebook, ["for i in range(150):\n    print('z' * (1 << 20))"])
    result = tmp_path / "result.json"
    child = psutil.Popen([sys.executable, "-m", "crystal_kernel.jupyter.nbrun", str(notebook), str(result),
                          "--upto", "1", "--timeout", "240", "--cell-limit", str(MB),
                          "--notebook-limit", str(4 * MB)], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while child.poll() is None:
        try:
            peak = max(peak, child.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.05)
    assert child.returncode == 0
    assert result.stat().st_size < 2 * MB
    assert peak < 150 * MB, f"the runner held {peak // MB} MB while 150 MB were printed"
