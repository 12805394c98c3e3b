"""SANDBOX-2: notebook_run works for a person who never ran IPython.

The kernel notebook_run starts runs in the sandbox, where the person's home folder is
not writable; IPython must make ``~/.ipython/profile_default`` at its first start, so
with a home that never saw IPython the kernel died ("Kernel died before replying to
kernel_info"). The run now gives that kernel an IPython folder (and matplotlib's) of the
session's own in temp. Through the real ``crystal run`` front, in ``full`` approval,
against the loopback model server; the home lives outside every temp folder (a temp
folder is writable in the sandbox, which would hide the failure)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from crystal_kernel.jobs import landlock
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")

# Both ways tool processes are confined (jobs/sandbox.py): bubblewrap where it works, and
# the Landlock fallback.
MECHANISMS = [m for m in ("bubblewrap", "landlock") if m == "landlock" or shutil.which("bwrap")]

pytestmark = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 (this machine has 7)")


@pytest.fixture
def fresh_home():
    """An empty home folder outside every temp folder (under the user's real cache)."""
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    home = real_home / ".cache" / "crystal-sandbox-tests" / uuid.uuid4().hex / "home"
    home.mkdir(parents=True)
    yield home
    shutil.rmtree(home.parent, ignore_errors=True)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_notebook_run_works_with_a_home_that_never_saw_ipython__SANDBOX_2(fresh_home, workspace, mechanism):
    """SANDBOX-2: a fresh home (no ~/.ipython, read-only to tools):
    notebook_run's kernel starts, the cells run and their outputs are written back; nothing
    is made in the person's home."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [new_code_cell("import IPython, os\nprint('ran', 6 * 7)"), new_code_cell("get_ipython().profile")]
    nbformat.write(nb, str(workspace / "fresh.ipynb"))
    replies = [{"tool_calls": [{"name": "notebook_run", "arguments": {"path": "fresh.ipynb", "timeout_seconds": 90}}]},
               {"text": "done"}]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IPYTHON", "MPLCONFIG", "JUPYTER_"))}
    with LLMServer(replies) as server:
        env.update({"HOME": str(fresh_home), "CRYSTAL_HOME": str(fresh_home / ".crystal"),
                    "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
                    "OPENAI_API_KEY": "sk-test", "CRYSTAL_SANDBOX_MECHANISM": mechanism})
        out = subprocess.run([CRYSTAL, "run", "run the notebook", "--workspace", str(workspace), "--format", "jsonl",
                              "--approval", "full"], capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    results = [e for e in map(json.loads, out.stdout.splitlines()) if e["type"] == "tool_result"]
    assert [r["name"] for r in results] == ["notebook_run"]
    assert results[0]["ok"], results[0]["text"]
    assert "Kernel died" not in results[0]["text"]
    got = nbformat.read(str(workspace / "fresh.ipynb"), as_version=4)
    assert got.cells[0].outputs[0].text == "ran 42\n"
    assert got.cells[1].outputs[0].data["text/plain"] == "'default'"
    assert not (fresh_home / ".ipython").exists()  # the person's home is left as it was
