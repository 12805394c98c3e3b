"""`crystal run … | head -1`: when the output's reader goes away, the run stops as at
Ctrl-C and ends quietly with a shell's SIGPIPE code (141), its session saved; before, a
BrokenPipeError traceback ended it with exit 1 (SPEC §11: exit codes; ROBUST: nothing
lost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = Path(sys.executable).parent / "crystal"


@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_a_reader_that_goes_away_ends_the_run_quietly_and_the_session_is_kept(tmp_path, fmt):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # A long answer, slowly: the reader has gone before the run's last write.
    reply = {"text": "".join(f"line {n}\n" for n in range(400)), "chunk": 20, "delay": 0.02}
    with LLMServer([reply], max_hang=20) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
        env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai",
                    "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-4.1",
                    "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        run = subprocess.Popen([str(CRYSTAL), "run", "Count to 400.", "--format", fmt, "--workspace", str(workspace)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=workspace)
        assert run.stdout is not None and run.stderr is not None
        first = run.stdout.readline()  # what `head -1` reads, then it is gone
        run.stdout.close()
        err = run.stderr.read().decode()
        code = run.wait(timeout=60)
    assert first, err
    assert code == 141, (code, err)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    sessions = list((workspace / ".crystal" / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1, err
    journal = sessions[0].read_text()
    assert "Count to 400." in journal
    # The answer so far is kept, marked interrupted, and the journal is signed as at any save.
    assert '"interrupted":true' in journal and "line 0" in journal
    assert json.loads(journal.splitlines()[-1])["t"] == "sig"
