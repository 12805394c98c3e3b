"""`crystal` with no subcommand, driven in a real terminal (tmux) by typing at human speed
against the loopback model server (SPEC §13 Fronts)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal

CRYSTAL = str(Path(sys.executable).parent / "crystal")
PROMPT = "›"  # capture-pane drops the trailing space


@pytest.fixture
def terminal_for(workspace):
    """Start ``crystal --workspace WS ARGS`` in a tmux pane talking to ``server``; the pane
    prints ``EXIT=<status>`` when crystal ends."""
    opened: list[TmuxTerminal] = []

    def start(server: LLMServer, *args: str, env_extra: dict[str, str] | None = None) -> TmuxTerminal:
        env = dict(os.environ)
        env.update({"CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
                    "CRYSTAL_MODEL": "gpt-test", "OPENAI_API_KEY": "sk-test", **(env_extra or {})})
        line = " ".join(shlex.quote(a) for a in [CRYSTAL, "--workspace", str(workspace), *args])
        term = TmuxTerminal(f"{line}; echo EXIT=$?; sleep 120", env)
        opened.append(term)
        term.wait_for(PROMPT, timeout=90)
        return term

    yield start
    for term in opened:
        term.close()


def tool_messages(server: LLMServer) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in server.bodies("chat")[-1]["messages"] if m["role"] == "tool"]


def test_a_turn_streams_its_answer_and_esc_enter_makes_a_new_line(terminal_for):
    """SPEC §13 Fronts: the answer appears piece by piece as the model streams it."""
    words = "Alpha bravo charlie delta echo foxtrot golf hotel"
    with LLMServer([{"text": words, "chunk": 6, "delay": 0.4}]) as server:
        term = terminal_for(server)
        term.type("line one")
        term.key("Escape", "Enter")
        term.type("line two")
        term.key("Enter")
        partial = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            screen = term.screen()
            if "Alpha" in screen and "hotel" not in screen:
                partial = True
            if "hotel" in screen:
                break
            time.sleep(0.05)
        term.wait_for(words)
        term.wait_for(PROMPT, after=1)
        body = server.bodies("chat")[0]
    assert partial, "the answer appeared all at once, not as it streamed"
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    assert "line one\nline two" in json.dumps(user["content"]).replace("\\n", "\n")


def test_an_edit_is_approved_after_its_diff_is_shown(terminal_for, workspace):
    (workspace / "greeting.txt").write_text("hello world\n")
    replies = [{"tool_calls": [{"name": "edit", "arguments": {"path": "greeting.txt", "old_string": "world",
                                                              "new_string": "there"}}]},
               {"text": "Edited the greeting."}]
    with LLMServer(replies) as server:
        term = terminal_for(server)
        term.type("fix the greeting")
        term.key("Enter")
        screen = term.wait_for("choice [1/2/3]:")
        # The diff is on screen before anything changed.
        assert "-hello world" in screen and "+hello there" in screen
        assert (workspace / "greeting.txt").read_text() == "hello world\n"
        term.type("1")
        term.key("Enter")
        term.wait_for("Edited the greeting.")
    assert (workspace / "greeting.txt").read_text() == "hello there\n"


def test_a_denial_carries_the_typed_reason_to_the_model_exactly(terminal_for, workspace):
    reason = "Keep build/: it holds the signed release, ask me first."
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
               {"text": "Understood, I left it."}]
    (workspace / "build").mkdir()
    with LLMServer(replies) as server:
        term = terminal_for(server)
        term.type("clean up")
        term.key("Enter")
        screen = term.wait_for("choice [1/2/3]:")
        assert "$ rm -rf build" in screen
        term.type("3")
        term.key("Enter")
        term.wait_for("reason for the model")
        term.type(reason)
        term.key("Enter")
        term.wait_for("Understood, I left it.")
        sent = tool_messages(server)
    assert (workspace / "build").is_dir()
    assert len(sent) == 1 and sent[0].endswith(f"Reason: {reason}"), sent


def test_help_and_jobs_run_the_kernels_slash_commands(terminal_for):
    with LLMServer([]) as server:
        term = terminal_for(server)
        term.type("/help")
        term.key("Enter")
        term.wait_for("/approval MODE")
        term.type("/jobs")
        term.key("Enter")
        term.wait_for("No background jobs in this session.")
        term.type("/nosuch")
        term.key("Enter")
        term.wait_for("Unknown command /nosuch")
        assert server.bodies("chat") == []  # commands never reach the model


def _sleeps(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def test_ctrl_c_interrupts_a_running_bash_and_leaves_no_process(terminal_for):
    """Ctrl-C during a turn cancels it and kills the command's process tree (no orphan)."""
    marker = "sleep 487"
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": f"{marker} & {marker}; wait"}}]},
               {"text": "never reached"}]
    with LLMServer(replies) as server:
        term = terminal_for(server, "--approval", "full")
        term.type("wait a while")
        term.key("Enter")
        term.wait_for("→ bash")
        deadline = time.monotonic() + 60
        while len(_sleeps(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        running = _sleeps(marker)
        assert len(running) >= 2, "the bash command never started"
        term.key("C-c")
        term.wait_for("(interrupted)")
        gone, alive = psutil.wait_procs(running, timeout=20)
        assert not alive, f"left behind: {alive}"
        term.wait_for(PROMPT, after=1)
        term.type("/jobs")  # the session goes on
        term.key("Enter")
        term.wait_for("No background jobs in this session.")


def test_ctrl_c_clears_the_line_then_arms_exit_and_ctrl_d_exits_with_status_0(terminal_for):
    with LLMServer([]) as server:
        term = terminal_for(server)
        term.type("some text")
        term.key("C-c")  # clears the line
        term.key("C-c")  # an empty line: arms exit
        term.wait_for("press Ctrl-C again or Ctrl-D to exit")
        assert "EXIT=" not in term.screen()
        term.key("C-d")
        term.wait_for("EXIT=0")


def test_piped_stdin_is_one_turn_like_crystal_run(workspace):
    env = dict(os.environ)
    with LLMServer([{"text": "Piped answer."}]) as server:
        env.update({"CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
                    "OPENAI_API_KEY": "sk-test"})
        out = subprocess.run([CRYSTAL, "--workspace", str(workspace)], input="hello", capture_output=True,
                             text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Piped answer."


def test_crystal_takes_the_process_flags_of_crystal_run(terminal_for):
    """SPEC §13 Fronts: `crystal` and `crystal run` accept the same process flags, and they
    reach the session (FL-1..FL-3, MODE-7)."""
    from crystal_kernel.cli import build_interactive_parser, build_parser

    def options(parser):
        return {s for a in parser._actions for s in a.option_strings}

    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]
    shared = options(run) - {"--format", "--session", "-h", "--help"}
    assert shared <= options(build_interactive_parser())
    with LLMServer([]) as server:
        term = terminal_for(server, "--disable-tool", "bash", "--mode", "plan")
        term.type("/tools")
        term.key("Enter")
        screen = term.wait_for("read")
        term.type("/mode")
        term.key("Enter")
        screen = term.wait_for("Mode: plan")
    tools_listing = screen.split("/tools", 1)[1].split("/mode", 1)[0]
    assert "Disabled: bash" in tools_listing
    assert not any(line.split()[:1] == ["bash"] for line in tools_listing.splitlines())
