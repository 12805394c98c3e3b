"""Interactive `crystal` in a real terminal (tmux), against the loopback model server:
the banner names the model, `/model` refuses a mistyped provider (FL-6), a question call
reads as its questions, and a form with several questions or a multi-select goes through
the kernel's "Submit these answers?" step (Q-3) before its answers are sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal

QUESTIONS = [
    {"header": "Database", "question": "Which database should the service use for its data?",
     "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "a file"}]},
    {"header": "Targets", "question": "Which platforms?", "multiple": True,
     "options": [{"label": "Linux"}, {"label": "macOS"}, {"label": "Windows"}]},
]


@pytest.fixture
def terminal(terminal_for):
    """crystal in a tmux pane wide enough for a form's lines."""
    return lambda server: terminal_for(server, width=160)


def send(term: TmuxTerminal, text: str) -> None:
    term.type(text)
    term.key("Enter")


def tool_results(server: LLMServer) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in server.bodies("chat")[-1]["messages"] if m["role"] == "tool"]


def test_the_banner_names_the_model_and_a_mistyped_provider_in_model_is_refused_unsaved(terminal):
    """FL-6: `/model antropic:claude-sonnet-4-6` is one line with "did you mean
    anthropic?"; the model stays, and config.json gets nothing."""
    config = Path(os.environ["CRYSTAL_HOME"]) / "config.json"
    with LLMServer([]) as server:
        term = terminal(server)
        assert "openai:gpt-test, session " in term.screen()
        send(term, "/model antropic:claude-sonnet-4-6")
        screen = term.wait_for("did you mean anthropic?")
        assert "Unknown provider 'antropic' (did you mean anthropic?)" in screen
        assert "Model is now" not in screen
        send(term, "/model")
        term.wait_for("Model: openai:gpt-test")
    assert not config.exists() or "antropic" not in config.read_text()


def test_a_two_question_form_shows_the_submit_step_and_back_answers_again(terminal):
    """Q-3 as in the kernel: after the last answer, "Submit these answers?" with each
    answer; 2 goes back to answer again, 1 sends what is on screen (Q-4)."""
    replies = [{"tool_calls": [{"name": "question", "arguments": {"questions": QUESTIONS}}]}, {"text": "Noted."}]
    with LLMServer(replies) as server:
        term = terminal(server)
        send(term, "set up the project")
        screen = term.wait_for("answer:")
        # The call reads as its questions, not as JSON cut mid-word.
        assert "→ question (2 questions): Database · Targets" in screen
        assert '{"questions"' not in screen
        send(term, "1")
        term.wait_for("Which platforms?")
        send(term, "1 3")
        screen = term.wait_for("Submit these answers?")
        assert "Database: Postgres" in screen and "Targets: Linux, Windows" in screen
        assert server.bodies("chat")[-1]["messages"][-1]["role"] != "tool"  # nothing sent yet
        send(term, "2")  # back
        term.wait_for("answer:", after=1)
        send(term, "2")
        term.wait_for("Which platforms?", after=1)
        send(term, "2")
        screen = term.wait_for("Targets: macOS")
        assert "Database: SQLite" in screen
        send(term, "1")
        term.wait_for("Noted.")
        sent = tool_results(server)
    assert json.loads(sent[0]) == [["SQLite"], ["macOS"]]


def test_dismissing_at_the_submit_step_fails_the_call_and_the_turn_goes_on(terminal):
    """Q-5 from the Q-3 step: 3 dismisses; the model gets a failed result, no answers."""
    replies = [{"tool_calls": [{"name": "question", "arguments": {"questions": QUESTIONS[1:]}}]},
               {"text": "Going on without answers."}]
    with LLMServer(replies) as server:
        term = terminal(server)
        send(term, "set up the project")
        term.wait_for("answer:")
        send(term, "2")
        term.wait_for("Submit these answers?")  # a multi-select alone confirms too
        send(term, "3")
        term.wait_for("Going on without answers.")
        sent = tool_results(server)
    assert "The person dismissed the questions." in sent[0] and "macOS" not in sent[0]
