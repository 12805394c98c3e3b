"""TRUST-6 in the interactive `crystal`: what reaches the terminal holds no control
sequence and no invisible character from the model or the file system, and an approval
shows the call as it will run (GUARD-4).

A real `crystal` in a real terminal (tmux, tests/cli/tmux_terminal.py) against the
loopback model server; every byte the program writes to the terminal is recorded
(``tmux pipe-pane``). prompt_toolkit draws the line with escape sequences of its own, so
the bytes are checked for the attack's sequences, not for ESC at large.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

from crystal_kernel.cli.terminal_person import CALL_LIMIT, approval_text
from crystal_kernel.core.interaction import ApprovalRequest
from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal

CRYSTAL = str(Path(sys.executable).parent / "crystal")
# What a person must never get raw: an OSC 52 clipboard write, a title change, the C1 CSI
# (UTF-8), a right-to-left override, a zero-width space, a no-break space and a line separator.
ATTACK = (b"\x1b]52", b"\x1b]0;", b"\xc2\x9b", "\u202e".encode(), "\u200b".encode(), "\u00a0".encode(),
          "\u2028".encode())
EVIL_NAME = "evil\u202etxt.exe"  # shows as "evilexe.txt" where the terminal applies bidi
COMMAND = "echo safe\u200b\u00a0; rm\u2028 -rf x \x1b]52;c;eA==\x07 \u202eevil"
# A background job whose output carries an OSC 52 write, a C1 CSI and a bidi override.
JOB = r"printf 'job \033]52;c;eA==\007 \302\233 \342\200\256 out\n'; sleep 30"


def test_completed_file_name_and_approved_command_reach_the_terminal_escaped(workspace, tmp_path):
    """A file name with U+202E, put on the line by Tab completion, a bash command with
    zero-width, no-break and line-separator characters and an OSC 52 sequence in its
    approval, and a job's output read with /logs: the screen shows each as its escape,
    and no raw byte of them is written."""
    (workspace / EVIL_NAME).write_text("x")
    record = tmp_path / "terminal.raw"
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]},
               {"text": "done \x1b]0;TITLE\x07 \u202e end"},
               {"tool_calls": [{"name": "bash_start", "arguments": {"command": JOB}}]}, {"text": "started"}]
    with LLMServer(replies) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-test", OPENAI_API_KEY="sk-test")
        line = " ".join(shlex.quote(a) for a in [CRYSTAL, "--workspace", str(workspace)])
        term = TmuxTerminal(f"{line}; echo EXIT=$?; sleep 120", env)
        try:
            term._tmux("pipe-pane", "-o", f"cat >> {shlex.quote(str(record))}")
            term.wait_for("›", timeout=90)
            term.type("look @evi")
            term.key("Tab")
            term.wait_for("@evil\\u202etxt.exe")  # the completed name on the line, escaped
            term.key("Enter")
            screen = term.wait_for("choice [1/2/3]:")
            assert "  $ echo safe\\u200b\\xa0; rm\\u2028 -rf x ^[]52;c;eA==^G \\u202eevil" in screen
            term.deny()
            term.wait_for("done ^[]0;TITLE^G \\u202e end")
            term.wait_for("›", after=1)
            term.type("start the job")
            term.key("Enter")
            term.wait_for("choice [1/2/3]:", after=1)
            term.type("1")
            term.key("Enter")
            term.wait_for("started")
            term.wait_for("›", after=2)
            deadline = time.monotonic() + 30
            while "job ^[]52;c;eA==^G \\x9b \\u202e out" not in term.screen() and time.monotonic() < deadline:
                term.type("/logs j1")  # the job's output may take a moment to arrive
                term.key("Enter")
                time.sleep(1)
            term.wait_for("job ^[]52;c;eA==^G \\x9b \\u202e out", timeout=1)
        finally:
            term.close()
        sent = json.dumps(server.bodies("chat")[0]["messages"])
    assert json.dumps(EVIL_NAME)[1:-1] in sent, "the file attached is the real one"
    data = record.read_bytes()
    assert b"look @evil" in data
    for raw in ATTACK:
        assert raw not in data, f"{raw!r} reached the terminal"


def test_an_approval_shows_a_long_call_whole_or_says_it_is_cut(workspace):
    """GUARD-4: another tool's arguments are shown whole (they were cut at 600 characters
    without a word), with invisible characters visible; past CALL_LIMIT the cut is said."""
    from crystal_kernel.host.bootstrap import SessionOptions, open_session

    session = open_session(SessionOptions(str(workspace), person_present=False, saves=False))
    try:
        hidden = "x" * 5000 + "\u200bTAIL-SECRET-PART"
        request = ApprovalRequest(call_id="c1", tool="deploy", arguments={"notes": hidden}, risk="execute",
                                  authority="workspace")
        text = approval_text(session, request, colour=False)
        assert "x" * 5000 + "\\u200bTAIL-SECRET-PART" in text
        huge = ApprovalRequest(call_id="c2", tool="deploy", arguments={"notes": "y" * (CALL_LIMIT + 10)},
                               risk="execute", authority="workspace")
        text = approval_text(session, huge, colour=False)
        assert f"only the first {CALL_LIMIT:,} are shown. Deny it if you cannot judge it." in text
    finally:
        import asyncio

        asyncio.run(session.close())
