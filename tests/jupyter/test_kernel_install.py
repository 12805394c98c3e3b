"""`crystal kernel install` refuses every flag the installed kernel would refuse, with
the kernel's own checks: one line on stderr, exit 2, nothing installed (FL-1 … FL-3,
MODE-7, SPEC §11 config values)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CRYSTAL = [sys.executable, "-m", "crystal_kernel.cli"]


def install(prefix: Path, *flags: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(CRYSTAL + ["kernel", "install", "--prefix", str(prefix), *flags],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def make_folder(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "prompt.json").write_text(json.dumps({"name": name.title(), "enabled": False}))


def baked(prefix: Path) -> list[str]:
    spec = json.loads((prefix / "share/jupyter/kernels/crystal/kernel.json").read_text())
    argv = spec["argv"]
    return argv[argv.index("{connection_file}") + 1:]  # the flags after the launcher's own


@pytest.mark.parametrize("flags,message", [
    (["--approval", "bogus"], "Unknown approval mode 'bogus'; use one of: plan, default, edit, review, audit, full."),
    (["--prompt-set", "nosuch"], "--prompt-set 'nosuch' is not a usable prompt set in {home}/promptsets."),
    (["--prompt-attachment", "nosuch"], "--prompt-attachment 'nosuch' is not a prompt attachment in Home or the workspace."),
    (["--model", ""], "Config key 'model' must be a non-empty string, not ''."),
    (["--disable-tool", "nope"], "--disable-tool: unknown built-in tool 'nope'."),
    (["--ask-timeout", "0"], "--ask-timeout must be a positive number of seconds."),
])
def test_install_refuses_a_flag_the_kernel_would_refuse(tmp_path, private_home, flags, message):
    out = install(tmp_path / "prefix", *flags, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == f"crystal: {message.format(home=private_home)}\n"
    assert out.stdout == ""
    assert not (tmp_path / "prefix").exists()


def test_install_accepts_sets_and_attachments_that_exist(tmp_path, private_home, workspace):
    make_folder(private_home / "promptsets", "strict")
    make_folder(private_home / "prompt-attachments", "house-style")
    make_folder(workspace / ".crystal" / "prompt-attachments", "team-notes")
    prefix = tmp_path / "prefix"
    # An attachment in the workspace the kernel will use (--workspace) is found.
    out = install(prefix, "--approval", "edit", "--mode", "plan", "--prompt-set", "strict",
                  "--prompt-attachment", "house-style", "--prompt-attachment", "team-notes",
                  "--workspace", str(workspace), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert baked(prefix) == ["--prompt-set", "strict", "--prompt-attachment", "house-style",
                             "--prompt-attachment", "team-notes", "--mode", "plan", "--approval", "edit",
                             "--workspace", str(workspace)]
    # Without --workspace the kernel's workspace is each notebook's folder: the check
    # looks in the current folder, as the kernel's start-up check does in its own.
    other = tmp_path / "other"
    out = install(other, "--prompt-attachment", "team-notes", cwd=workspace)
    assert out.returncode == 0, out.stderr
    out = install(tmp_path / "third", "--prompt-attachment", "team-notes", cwd=tmp_path)
    assert out.returncode == 2 and "'team-notes' is not a prompt attachment" in out.stderr
    assert not (tmp_path / "third").exists()


def test_install_warns_when_another_spec_of_that_name_takes_precedence(tmp_path, private_home):
    """A newcomer's `crystal kernel install --user` after `make demo`: Jupyter in the venv
    prefers the venv's own `crystal` spec, so the install says so (here a JUPYTER_PATH
    folder plays the venv's, which comes first the same way)."""
    import os

    first = tmp_path / "env-share" / "kernels" / "crystal"
    first.mkdir(parents=True)
    (first / "kernel.json").write_text(json.dumps({"argv": ["python", "-m", "crystal_kernel.jupyter"],
                                                   "display_name": "Crystal (venv)", "language": "markdown"}))
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "env-share"))
    out = subprocess.run(CRYSTAL + ["kernel", "install", "--user"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    user_spec = Path(os.environ["HOME"]) / ".local" / "share" / "jupyter" / "kernels" / "crystal"
    assert out.stdout == f"Installed kernelspec crystal in {user_spec}\n"
    assert out.stderr == (f"crystal: warning: Jupyter here uses another kernelspec named 'crystal' in {first}, "
                          "which takes precedence over the one just installed; update that one (for a virtual "
                          "environment: crystal kernel install --sys-prefix) or install under another --name.\n")
    # Installing where Jupyter looks first gives no warning.
    quiet = subprocess.run(CRYSTAL + ["kernel", "install", "--prefix", str(tmp_path / "p")], capture_output=True,
                           text=True, timeout=60, env=dict(env, JUPYTER_PATH=str(tmp_path / "p" / "share" / "jupyter")))
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_install_bakes_the_reasoning_effort_and_refuses_a_bad_one(tmp_path, private_home):
    """SPEC §12: --reasoning EFFORT on crystal kernel install."""
    prefix = tmp_path / "prefix"
    out = install(prefix, "--reasoning", "high", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert baked(prefix) == ["--reasoning", "high"]
    bad = install(tmp_path / "other", "--reasoning", "extreme", cwd=tmp_path)
    assert bad.returncode == 2 and "--reasoning" in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "other").exists()
