"""Preferences stick (FL-5, SPEC §11): ``/model``, ``/approval`` and ``/mode``
save to config.json atomically, keep unknown keys and drop the old ``promptSet`` /
``promptAttachments`` keys; process flags never save. Run through the real ``crystal``
command, one process per step, so "sticks" means a new process sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def crystal(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_PROVIDER", "CRYSTAL_MODEL",
                                                                     "CRYSTAL_APPROVAL", "OPENAI", "ANTHROPIC"))}
    env["OPENAI_API_KEY"] = "sk-test"  # /model openai:… makes a client; no request is sent
    return subprocess.run([CRYSTAL, *args], capture_output=True, text=True, env=env, timeout=60)


def test_model_approval_and_mode_are_saved_and_stick_FL5(private_home, workspace):
    config = private_home / "config.json"
    config.write_text(json.dumps({"provider": "replay", "teamSetting": {"keep": [1, 2]},
                                  "promptSet": "old", "promptAttachments": ["x"]}, indent=2))
    ws = ["--workspace", str(workspace)]
    out = crystal("run", "/model openai:gpt-4.1-mini", *ws)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Model is now openai:gpt-4.1-mini. Saved as your default in ~/.crystal/config.json.\n"
    saved = json.loads(config.read_text())
    # Unknown keys survive; the FL-5 keys are dropped at this first save of preferences.
    assert saved == {"provider": "openai", "model": "gpt-4.1-mini", "teamSetting": {"keep": [1, 2]}}
    assert crystal("run", "/approval edit", *ws).returncode == 0
    assert crystal("run", "/mode plan", *ws).returncode == 0
    assert json.loads(config.read_text()) == {"provider": "openai", "model": "gpt-4.1-mini",
                                              "teamSetting": {"keep": [1, 2]}, "approval": "edit", "mode": "plan"}
    # Atomic: no temp file left (session-key signs the session journals, TRUST-5).
    assert sorted(p.name for p in private_home.iterdir()) in (["config.json"], ["config.json", "session-key"])
    # A new process starts from the saved preferences.
    assert crystal("run", "/model", *ws).stdout == "Model: openai:gpt-4.1-mini\n"
    assert crystal("run", "/approval", *ws).stdout == "Approval: edit\n"
    assert crystal("run", "/mode", *ws).stdout == "Mode: plan\n"


def test_flags_and_bad_values_never_write_config_FL5(private_home, workspace):
    config = private_home / "config.json"
    config.write_text('{"mode": "work", "promptSet": "old"}\n')
    before = config.read_bytes()
    ws = ["--workspace", str(workspace)]
    # Process flags change this process only.
    out = crystal("run", "/mode", *ws, "--mode", "plan", "--approval", "full", "--prompt-set", "default")
    assert out.stdout == "Mode: plan\n"
    # A refused command changes nothing.
    out = crystal("run", "/mode sideways", *ws)
    assert out.returncode == 2 and out.stderr == "crystal: Unknown mode 'sideways'; use plan or work.\n"
    out = crystal("run", "/model anthropic:claude-sonnet-4-6", *ws)  # no key set: refused
    assert out.returncode == 2 and "ANTHROPIC_API_KEY is not set" in out.stderr
    assert config.read_bytes() == before


async def test_a_config_that_cannot_be_written_keeps_the_change_and_says_so(private_home, workspace):
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.commands import run_command
    from crystal_kernel.host.session import Session
    from crystal_kernel.testing.scripted import ScriptedProvider

    session = Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]))
    (private_home / "config.json").mkdir()  # not a file: neither readable nor replaceable
    result = await run_command(session, "/mode plan")
    assert result.text.startswith("Mode is now plan. It was not saved as your default: Cannot read config file ")
    assert session.mode == "plan"
    assert (private_home / "config.json").is_dir()
