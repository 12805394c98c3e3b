"""SPEC §13 Fronts: `crystal`, `crystal space` and `crystal run` accept the same process
flags (FL-1..FL-3, MODE-7, the model flags), and each refuses a bad one the same way —
one line on stderr, exit 2, nothing started or written — as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.cli import build_interactive_parser, build_parser

CRYSTAL = str(Path(sys.executable).parent / "crystal")
PROCESS_FLAGS = {"--prompt-set", "--prompt-attachments", "--prompt-attachment", "--disable-tool"}
MODEL_FLAGS = {"--provider", "--model", "--base-url", "--api-key-env", "--mode", "--approval", "--reasoning"}
SESSION_FLAGS = {"--workspace", "--resume"}


def options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_the_three_fronts_take_the_same_process_model_and_session_flags():
    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    fronts = {"crystal": build_interactive_parser(), "crystal run": subcommands["run"],
              "crystal space": subcommands["space"]}
    for name, parser in fronts.items():
        missing = (PROCESS_FLAGS | MODEL_FLAGS | SESSION_FLAGS) - options(parser)
        assert not missing, f"{name} lacks {sorted(missing)}"


@pytest.mark.parametrize("front", [["run", "hello"], [], ["space", "--no-browser"]],
                         ids=["crystal run", "crystal", "crystal space"])
@pytest.mark.parametrize("flags, says", [
    (["--disable-tool", "nosuch"], "nosuch"),
    (["--prompt-set", "missing-set"], "missing-set"),
    (["--prompt-attachments", "off", "--prompt-attachment", "a"], "--prompt-attachment cannot be combined"),
])
def test_every_front_refuses_a_bad_process_flag_in_one_line_and_starts_nothing(front, flags, says, workspace):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    out = subprocess.run([CRYSTAL, *front, "--workspace", str(workspace), *flags], input="hello", env=env,
                         capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and says in lines[0], out.stderr
    assert not any(workspace.iterdir()), list(workspace.iterdir())
