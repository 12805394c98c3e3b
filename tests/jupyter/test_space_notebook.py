"""The notebook `crystal space` opens (jupyter/space_notebook.py, SPEC §13 Fronts and
Notebook identity): never a replaced file, the notebook that used a resumed session
when it still names it, never a path the workspace's notebooks.json points outside."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter.notebook_map import remember
from crystal_kernel.jupyter.space_notebook import create_notebook, space_notebook
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def saved_session(workspace: Path) -> str:
    """A session `crystal run` saved (and this Home signed) in ``workspace``."""
    with LLMServer([{"text": "Noted."}]) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url, CRYSTAL_MODEL="m",
                   OPENAI_API_KEY="sk-test")
        out = subprocess.run([CRYSTAL, "run", "--workspace", str(workspace), "remember this"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return re.search(r"Session (\S+) saved", out.stderr).group(1)


def home() -> Path:
    return Path(os.environ["CRYSTAL_HOME"])


def test_a_new_notebook_never_replaces_a_file(workspace):
    (workspace / "crystal-x.ipynb").write_text("mine")
    made = create_notebook(workspace, "crystal-x")
    assert made.name == "crystal-x-2.ipynb"
    assert (workspace / "crystal-x.ipynb").read_text() == "mine"
    data = json.loads(made.read_text())
    assert data["metadata"]["kernelspec"]["name"] == "crystal" and "crystal" not in data["metadata"]
    assert sorted(p.name for p in workspace.iterdir()) == ["crystal-x-2.ipynb", "crystal-x.ipynb"]  # no temp left


def test_resume_reopens_the_notebook_that_names_the_session_else_makes_one(workspace):
    session_id = saved_session(workspace)
    (workspace / "sub").mkdir()
    analysis = workspace / "sub" / "analysis.ipynb"
    analysis.write_text(json.dumps({"cells": [], "metadata": {"crystal": {"session_id": session_id}},
                                    "nbformat": 4, "nbformat_minor": 5}))
    remember(workspace, str(analysis), session_id)  # as the kernel records it (JPY_SESSION_NAME)
    assert space_notebook(workspace, home(), session_id).path == analysis.resolve()
    assert analysis.stat().st_size > 0 and json.loads(analysis.read_text())["cells"] == []  # unchanged
    # The notebook no longer names the session: a new one that does.
    analysis.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    made = space_notebook(workspace, home(), session_id).path
    assert made.name == f"crystal-{session_id}.ipynb"
    assert json.loads(made.read_text())["metadata"]["crystal"]["session_id"] == session_id


def test_a_map_entry_outside_the_workspace_is_not_opened(workspace, tmp_path):
    """notebooks.json is a workspace file (untrusted): a path it gives that leads out of
    the workspace is not opened, even when that notebook names the session."""
    session_id = saved_session(workspace)
    outside = tmp_path / "elsewhere.ipynb"
    outside.write_text(json.dumps({"cells": [], "metadata": {"crystal": {"session_id": session_id}},
                                   "nbformat": 4, "nbformat_minor": 5}))
    remember(workspace, "../elsewhere.ipynb", session_id)
    made = space_notebook(workspace, home(), session_id).path
    assert made.parent == workspace and made.name == f"crystal-{session_id}.ipynb"


def test_resume_refuses_an_unknown_or_malformed_id_and_writes_nothing(workspace):
    with pytest.raises(UserError, match="no saved session"):
        space_notebook(workspace, home(), "20260101-000000-abcdef")
    with pytest.raises(UserError, match="not a valid session id"):
        space_notebook(workspace, home(), "../../etc")
    assert list(workspace.iterdir()) == []
