"""`crystal run` ends its process once its turn is done (SPEC §11; the whole turn's
time, docs/benchmarks.md): as Python's own exit does, minus the interpreter's teardown, which freed every
loaded module one object at a time (20-40 ms between the run's last output and its exit).
What a caller sees is unchanged: the whole answer on stdout, the exit code, atexit
handlers run, other threads waited for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = Path(sys.executable).parent / "crystal"

# Loaded in the crystal process (a sitecustomize on PYTHONPATH): an atexit handler, a
# thread that is not a daemon and is still writing when the run ends, a thread pool left
# open with its worker idle, and, made by the
# last atexit handler, garbage that says so when the teardown's last collection frees it.
PROBE = """
import atexit, os, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

_POOL = ThreadPoolExecutor(1)  # an idle worker at the end: told to end, as Python's exit does
_POOL.submit(int).result()


class _Freed:
    def __del__(self, write=os.write) -> None:
        write(2, b"PROBE teardown\\n")


def _garbage() -> None:
    cycle = _Freed()
    cycle.me = cycle  # found only by a collection: the interpreter's teardown runs one


def _late() -> None:
    time.sleep(0.3)
    sys.stderr.write("PROBE thread done\\n")


atexit.register(_garbage)  # registered first: runs last
atexit.register(lambda: sys.stderr.write("PROBE atexit ran\\n"))
threading.Thread(target=_late, daemon=False).start()
"""


def run_crystal(how: str, server: LLMServer, workspace: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update({"CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": "openai",
                "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_API_KEY_ENV": "TEST_KEY",
                "TEST_KEY": "sk-test", "PYTHONPATH": str(probe)})
    argv = [str(CRYSTAL)] if how == "script" else [sys.executable, "-m", "crystal_kernel.cli"]
    return subprocess.run([*argv, "run", "hello", "--workspace", str(workspace)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("how", ["script", "python -m"])
def test_run_ends_without_the_interpreter_teardown_and_keeps_its_output(how: str, workspace: Path, tmp_path: Path):
    answer = "".join(f"line {i} of a long answer\n" for i in range(4_000))  # ~100 KB: more than a pipe holds
    with LLMServer([{"text": answer, "chunk": 4096}]) as server:
        done = run_crystal(how, server, workspace, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == answer.strip()  # every byte, flushed before the end
    assert "PROBE thread done" in done.stderr  # other threads are waited for
    assert "PROBE atexit ran" in done.stderr
    assert "PROBE teardown" not in done.stderr, "the interpreter's teardown ran after the run"


def test_a_failed_run_keeps_its_exit_code_and_says_why(workspace: Path, tmp_path: Path):
    with LLMServer([{"status": 401, "message": "bad key"}]) as server:
        done = run_crystal("script", server, workspace, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "crystal:" in done.stderr and "PROBE atexit ran" in done.stderr
    assert "PROBE teardown" not in done.stderr
