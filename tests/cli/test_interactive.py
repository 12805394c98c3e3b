"""`crystal` with no subcommand, driven in a real terminal (tmux) by typing at human speed
against the loopback model server (SPEC §13 Fronts)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import psutil

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.conftest import CRYSTAL, PROMPT


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
        term.deny(reason)
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
        term.type("/tod")
        term.key("Tab")  # completes the command name
        term.wait_for("/todos")
        term.key("Enter")
        term.wait_for("No todos.")
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
        term.wait_for(PROMPT, after=1)  # the next prompt holds the keyboard again
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


def test_the_question_tool_is_a_form_answered_by_number_several_numbers_or_free_text(terminal_for):
    """Q-1/Q-4 in the terminal: one choice by number, a multi-select, a free-text answer."""
    questions = [
        {"header": "Database", "question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
        {"header": "Targets", "question": "Which platforms?", "multiple": True,
         "options": [{"label": "Linux"}, {"label": "macOS"}, {"label": "Windows"}]},
        {"header": "Name", "question": "What is the project called?"},
    ]
    replies = [{"tool_calls": [{"name": "question", "arguments": {"questions": questions}}]}, {"text": "Noted."}]
    with LLMServer(replies) as server:
        term = terminal_for(server)
        term.type("set up the project")
        term.key("Enter")
        screen = term.wait_for("answer:")
        assert "Which database?" in screen and "2) SQLite" in screen
        term.type("2")
        term.key("Enter")
        term.wait_for("Which platforms?")
        term.type("4")  # out of range: asked again
        term.key("Enter")
        term.wait_for("(one or more numbers", after=1)
        term.type("1 3")
        term.key("Enter")
        term.wait_for("What is the project called?")
        term.type("Crystal Ball")
        term.key("Enter")
        term.wait_for("Submit these answers?")  # Q-3 (tests/cli/test_interactive_forms.py)
        term.type("1")
        term.key("Enter")
        term.wait_for("Noted.")
        sent = tool_messages(server)
    assert json.loads(sent[0]) == [["SQLite"], ["Linux", "Windows"], ["Crystal Ball"]]


def test_resume_bare_and_by_flag_continue_the_saved_session(terminal_for, workspace):
    replies = [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third answer."}]
    with LLMServer(replies) as server:
        term = terminal_for(server)
        term.type("remember the word turquoise")
        term.key("Enter")
        screen = term.wait_for("First answer.")
        session_id = screen.split("session ", 1)[1].split()[0]
        term.wait_for(PROMPT, after=1)  # Ctrl-D before the prompt is back would be the tty's EOF
        term.key("C-d")
        term.wait_for("EXIT=0")
        assert f"crystal --resume {session_id} --workspace {workspace}" in term.screen()

        again = terminal_for(server, "--resume", session_id)
        again.type("what was the word?")
        again.key("Enter")
        again.wait_for("Second answer.")
        again.wait_for(PROMPT, after=1)
        again.key("C-d")
        again.wait_for("EXIT=0")

        fresh = terminal_for(server)
        fresh.type("/resume")  # bare: the newest saved session of the workspace
        fresh.key("Enter")
        fresh.wait_for(f"Resumed session {session_id}")
        fresh.type("and now?")
        fresh.key("Enter")
        fresh.wait_for("Third answer.")
        bodies = server.bodies("chat")
    for body, expected in ((bodies[1], 3), (bodies[2], 5)):
        users = [json.dumps(m["content"]) for m in body["messages"] if m["role"] in ("user", "assistant")]
        assert "turquoise" in users[0] and len(users) == expected, users


def test_logs_follow_shows_a_background_job_as_it_writes(terminal_for):
    command = "for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.5; done"
    replies = [{"tool_calls": [{"name": "bash_start", "arguments": {"command": command}}]}, {"text": "Started."}]
    with LLMServer(replies) as server:
        term = terminal_for(server, "--approval", "full")
        term.type("start the ticker")
        term.key("Enter")
        term.wait_for("Started.")
        term.type("/jobs")
        term.key("Enter")
        term.wait_for("j1")
        term.type("/logs j1 --follow")
        term.key("Enter")
        term.wait_for("tick-6", timeout=60)
        term.wait_for("(job j1 ended)")


def test_model_text_cannot_drive_the_terminal_and_no_color_turns_colour_off(terminal_for, workspace):
    """TRUST-6 in this front: an escape sequence from the model is shown, not obeyed; and
    with NO_COLOR the diff of an approval carries no colour."""
    (workspace / "f.txt").write_text("old\n")
    replies = [{"text": "Hi \x1b]2;PWNED\x07 there \x1b[2J"},
               {"tool_calls": [{"name": "write", "arguments": {"path": "f.txt", "content": "new\n"}}]},
               {"text": "Done."}]
    with LLMServer(replies) as server:
        term = terminal_for(server, env_extra={"NO_COLOR": "1"})
        term.type("hello")
        term.key("Enter")
        term.wait_for("there")
        assert "PWNED" not in term._tmux("display-message", "-p", "#{pane_title}")
        assert "Crystal" in term.screen()  # the screen was not cleared
        term.type("rewrite f")
        term.key("Enter")
        term.wait_for("choice [1/2/3]:")
        coloured = term._tmux("capture-pane", "-p", "-e", "-S", "-2000")
        diff_lines = [line for line in coloured.splitlines() if "-old" in line or "+new" in line]
        assert diff_lines and not any("\x1b[3" in line for line in diff_lines), diff_lines
        term.deny()
        term.wait_for("Done.")


def test_a_trailing_backslash_continues_the_line_and_a_second_ctrl_c_exits(terminal_for):
    with LLMServer([{"text": "Two lines received."}]) as server:
        term = terminal_for(server)
        term.type("first\\")
        term.key("Enter")
        term.type("second")
        term.key("Enter")
        term.wait_for("Two lines received.")
        user = [m for m in server.bodies("chat")[0]["messages"] if m["role"] == "user"][-1]
        assert "first\nsecond" in json.dumps(user["content"]).replace("\\n", "\n")
        term.wait_for(PROMPT, after=1)
        term.key("C-c")
        term.wait_for("press Ctrl-C again")
        term.wait_for(PROMPT, after=2)
        term.key("C-c")
        term.wait_for("EXIT=0")


def test_tab_completes_prompt_names_and_file_mentions_and_a_mention_attaches_the_file(terminal_for, workspace):
    """The kernel's completion in the terminal (host/completion.py): a prompt set's name
    after /promptset, an attachment's after /promptattach enable, a file after @; the
    completed names take effect and the mentioned file reaches the model (host/mentions.py)."""
    home = Path(os.environ["CRYSTAL_HOME"])
    for folder, text in ((home / "promptsets" / "terse", "You are terse. TERSE-SET-BODY"),
                         (workspace / ".crystal" / "prompt-attachments" / "house-style", "HOUSE-STYLE-NOTE")):
        folder.mkdir(parents=True)
        (folder / "prompt.json").write_text('{"enabled": false}')
        (folder / "work.md").write_text(text)
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print('kumquat')\n")
    with LLMServer([{"text": "It prints kumquat."}]) as server:
        term = terminal_for(server)
        term.type("/promptset te")
        term.key("Tab")
        term.wait_for("/promptset terse")
        term.key("Enter")
        term.wait_for(PROMPT, after=1)
        term.type("/promptattach enable ho")
        term.key("Tab")
        term.wait_for("/promptattach enable house-style")
        term.key("Enter")
        term.wait_for(PROMPT, after=2)
        term.type("what does @src/ma")
        term.key("Tab")
        term.wait_for("what does @src/main.py")
        term.type(" print?")
        term.key("Enter")
        term.wait_for("It prints kumquat.")
        assert "Attached @src/main.py" in term.screen()
        body = server.bodies("chat")[0]
    system = json.dumps(body["messages"][0]["content"])
    assert "TERSE-SET-BODY" in system and "HOUSE-STYLE-NOTE" in system
    user = json.dumps([m["content"] for m in body["messages"] if m["role"] == "user"][-1])
    assert "what does @src/main.py print?" in user and '<file path=\\"src/main.py\\">' in user and "kumquat" in user


def test_long_tool_output_is_folded_and_expand_shows_it_whole(terminal_for):
    """A long result shows its first lines and '… N more lines — /expand 1'; /expand
    (completed by Tab) prints it whole. The model got all of it either way."""
    command = "for i in $(seq 1 40); do echo row-$i; done"
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "Listed."}]
    with LLMServer(replies) as server:
        term = terminal_for(server, "--approval", "full")
        term.type("list the rows")
        term.key("Enter")
        screen = term.wait_for("Listed.")
        folded = re.search(r"… (\d+) more lines — /expand 1", screen)
        assert folded and int(folded.group(1)) >= 30, screen
        assert "row-8" in screen and "row-40" not in screen
        term.wait_for(PROMPT, after=1)
        term.type("/exp")
        term.key("Tab")
        term.wait_for("/expand")
        term.type(" 1")
        term.key("Enter")
        screen = term.wait_for("end of output 1")
        assert "row-40" in screen
        assert "row-40" in tool_messages(server)[0]
        term.type("/expand 7")
        term.key("Enter")
        term.wait_for("No folded output 7; the ones kept are 1–1.")
