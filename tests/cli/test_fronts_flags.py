"""FL-6, SPEC §13 Fronts: `crystal`, `crystal run`, `crystal space` and `crystal acp` take
the same process flags (FL-1..FL-3, MODE-7, the model flags, `--session` and `--resume`),
accept them alike (`crystal acp` checks a session id alike, then refuses it: its client
picks the sessions), and check them, and every setting, with one shared
check before anything starts or is written: a bad one is one line on stderr, exit 2,
nothing started (no server, no session) and nothing written (workspace and Home as
they were), with a "did you mean" when a known name is close. All as real processes."""

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
SESSION_FLAGS = {"--workspace", "--session", "--resume"}
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")

# How each front is started for one check; stdin is not a terminal, so `crystal` runs one
# turn as `crystal run -` does, and `crystal acp` serves until stdin ends.
FRONTS = {"crystal run": ["run", "hello"], "crystal": [], "crystal space": ["space", "--no-browser"],
          "crystal acp": ["acp"]}
SESSION_FRONTS = ("crystal run", "crystal", "crystal space")


def options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def front_parsers() -> dict:
    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    return {"crystal": build_interactive_parser(), "crystal run": subcommands["run"],
            "crystal space": subcommands["space"], "crystal acp": subcommands["acp"]}


def test_every_front_takes_the_same_process_and_model_flags_and_the_session_fronts_session_flags():
    for name, parser in front_parsers().items():
        wanted = PROCESS_FLAGS | MODEL_FLAGS | SESSION_FLAGS
        missing = wanted - options(parser)
        assert not missing, f"{name} lacks {sorted(missing)}"


def crystal(args: list[str], home: Path, stdin: str = "hello", **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("CRYSTAL_")}
    base.update(HOME=str(home.parent), CRYSTAL_HOME=str(home), **env)
    return subprocess.run([CRYSTAL, *args], input=stdin, env=base, capture_output=True, text=True, timeout=60)


def everything_in(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


# (flags, what the one line says): each front refuses each alike.
BAD = [
    pytest.param(["--provider", "openia"], "Unknown provider 'openia' (did you mean openai?)", id="provider"),
    pytest.param(["--workspace", "/nope"], "The workspace folder '/nope' does not exist.", id="workspace"),
    pytest.param(["--mode", "plann"], "invalid choice: 'plann' (choose from 'plan', 'work') (did you mean plan?)",
                 id="mode"),
    pytest.param(["--approval", "ful"], "Unknown approval mode 'ful'", id="approval"),
    pytest.param(["--reasoning", "hgh"], "(did you mean high?)", id="reasoning"),
    pytest.param(["--base-url", "localhost:11434/v1"], "has no http:// or https://", id="base-url"),
    pytest.param(["--model", ""], "Config key 'model' must be a non-empty string", id="model"),
    pytest.param(["--api-key-env", ""], "Config key 'apiKeyEnv' must be a non-empty string", id="api-key-env"),
    pytest.param(["--disable-tool", "nosuch"], "unknown built-in tool 'nosuch'", id="disable-tool"),
    pytest.param(["--prompt-set", "missing-set"], "missing-set", id="prompt-set"),
    pytest.param(["--prompt-attachment", "missing-att"], "missing-att", id="prompt-attachment"),
    pytest.param(["--prompt-attachments", "of"], "(did you mean off?)", id="prompt-attachments"),
    pytest.param(["--prompt-attachments", "off", "--prompt-attachment", "a"],
                 "--prompt-attachment cannot be combined", id="attachments-off-and-one"),
    pytest.param(["--provder=openai"], "unrecognized arguments: --provder=openai (did you mean --provider?)",
                 id="unknown-flag"),
]
SESSION_BAD = [
    pytest.param(["--session", "../x"], "--session '../x' is not a valid session id", id="session"),
    pytest.param(["--resume", "../x"], "--resume '../x' is not a valid session id", id="resume"),
    pytest.param(["--session", "a", "--resume", "b"], "not allowed with argument", id="session-and-resume"),
]


def check_refused(front: str, flags: list[str], says: str, workspace: Path, env: dict[str, str] | None = None) -> None:
    home = workspace.parent / "home" / ".crystal"
    home.mkdir(parents=True)
    before = everything_in(home.parent)
    args = [*FRONTS[front], *(["--workspace", str(workspace)] if "--workspace" not in flags else []), *flags]
    out = crystal(args, home, **(env or {}))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and says in lines[0], (front, out)
    assert "Crystal space on" not in out.stdout and out.stdout == "", out.stdout  # no server started, no answer
    assert everything_in(workspace) == [], everything_in(workspace)  # no notebook, no session
    assert everything_in(home.parent) == before


@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("flags, says", BAD)
def test_every_front_refuses_a_bad_flag_alike_in_one_line_and_starts_and_writes_nothing(front, flags, says, workspace):
    check_refused(front, flags, says, workspace)


@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("flags, says", SESSION_BAD)
def test_every_session_front_refuses_a_bad_session_flag_alike(front, flags, says, workspace):
    check_refused(front, flags, says, workspace)


@pytest.mark.parametrize("front", list(FRONTS))
def test_a_bad_setting_from_the_environment_is_refused_like_the_flag(front, workspace):
    """Every setting, not only the flags: CRYSTAL_PROVIDER=openia is the same line."""
    check_refused(front, [], "Unknown provider 'openia' (did you mean openai?)", workspace,
                  env={"CRYSTAL_PROVIDER": "openia"})


GOOD = ["--provider", "replay", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NOKEY",
        "--mode", "plan", "--approval", "edit", "--reasoning", "low", "--prompt-set", "default",
        "--prompt-attachments", "on", "--prompt-attachment", "nothing-yet", "--disable-tool", "bash"]


@pytest.mark.parametrize("front", ["crystal run", "crystal", "crystal acp"])
def test_every_front_accepts_every_good_flag(front, workspace, tmp_path):
    """The same good flags run on each front (crystal space's start with them:
    tests/jupyter/test_space_start.py). A prompt attachment named by a flag must exist."""
    home = tmp_path / "home" / ".crystal"
    (home / "prompt-attachments" / "nothing-yet").mkdir(parents=True)
    (home / "prompt-attachments" / "nothing-yet" / "work.md").write_text("Say hello.\n")
    (home / "prompt-attachments" / "nothing-yet" / "prompt.json").write_text('{"enabled": false}')
    flags = [*GOOD, *(["--session", "20261207-000000-abcdef"] if front in SESSION_FRONTS else [])]
    args = ["run", "-"] if front == "crystal run" else ["acp"] if front == "crystal acp" else []
    out = crystal([*args, "--workspace", str(workspace), *flags], home, stdin="" if front == "crystal acp" else "/help")
    assert out.returncode == 0, out
    if front != "crystal acp":
        assert "/help" in out.stdout and "/mode plan|work" in out.stdout, out.stdout


def test_crystal_space_takes_session_for_a_saved_session_only(workspace):
    """`crystal space --session ID` continues a saved session like --resume; a space's new
    notebooks start their own sessions, so an id not saved is refused, before anything."""
    check_refused("crystal space", ["--session", "20261207-000000-abcdef"],
                  "There is no saved session 20261207-000000-abcdef", workspace)


@pytest.mark.parametrize("flag", ["--session", "--resume"])
def test_crystal_acp_refuses_a_good_session_id_saying_the_client_loads_sessions(flag, workspace):
    """FL-6 on the ACP front: `crystal acp --session ID` is taken and its id checked like
    every front's (above), but one agent serves every session its client opens, so a
    well-formed id is refused with one line naming session/load, before anything is
    served or written (docs/acp.md)."""
    check_refused("crystal acp", [flag, "20261207-000000-abcdef"],
                  f"crystal acp takes no {flag}: one agent serves every session its ACP client opens, and the "
                  "client continues '20261207-000000-abcdef' with session/load", workspace)
