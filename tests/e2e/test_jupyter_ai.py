"""Crystal in Jupyter AI's chat panel (docs/acp.md "Jupyter AI").

A real ``jupyter lab`` with jupyter-ai 3 (a test dependency, in the same environment as
Crystal) and headless Chromium: a person opens a new chat from the launcher, asks
``@Crystal /help`` as the first message of the session (Jupyter AI sends it behind its
"System note"), sees the help rendered as a list, then asks a question and sees
Crystal's answer from the loopback model. The persona starts Crystal with its default
command (no ``CRYSTAL_ACP_COMMAND``). Screenshots: ``$CRYSTAL_SHOTS`` (default
tests/e2e/artifacts/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.e2e.conftest import ARTIFACTS, DELAY, blank_page, ensure_built, running_lab

SHOTS = Path(os.environ.get("CRYSTAL_SHOTS", str(ARTIFACTS)))
ANSWER = "Hello from Crystal, here in Jupyter AI's chat."
MESSAGES = ".jp-chat-messages-container"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Jupyter AI's chats are shared documents: this lab runs with collaboration on, and
    only entry-point personas (the vendored ones need CLIs that are not here)."""
    ensure_built()
    # An empty CRYSTAL_ACP_COMMAND is unset: the persona's default command starts Crystal.
    env = {"JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY": "1", "CRYSTAL_ACP_COMMAND": ""}
    with running_lab(tmp_path_factory.mktemp("lab-jai"), collaborative=True, env_extra=env, jupyter_ai=True) as started:
        yield started


def send(page, text: str) -> None:
    """Type into the chat's input at a person's pace and send it. The chat's persona
    picker already names Crystal (the only persona here); the mention stays in the text
    as typed, as it does in Jupyter AI's message."""
    box = page.locator(".jp-chat-input-container textarea").first
    box.click()
    page.keyboard.type(text, delay=DELAY)
    # The chat's completion popup (of "@Crystal" or "/help") may take the first Enter to
    # pick an entry; a person then presses Enter again to send.
    for _ in range(3):
        page.keyboard.press("Enter")
        try:
            page.wait_for_function("(box) => box.value.trim() === ''", arg=box.element_handle(), timeout=3000)
            return
        except PlaywrightTimeoutError:
            continue
    raise AssertionError(f"the chat did not send {text!r}: {box.input_value()!r} stays in the box")


@pytest.mark.timeout(600)
def test_help_and_an_answer_in_jupyter_ai_chat(browser, lab):
    lab.server.add({"text": ANSWER})
    SHOTS.mkdir(parents=True, exist_ok=True)
    with blank_page(browser) as page:
        page.set_default_timeout(60_000)
        page.goto(f"{lab.url}lab?token={lab.token}")
        page.locator(".jp-LauncherCard", has_text="Chat").first.click(timeout=120_000)
        page.locator(".jp-chat-input-container textarea").first.wait_for(timeout=120_000)
        # Jupyter AI 3.2 says "Directory not found" for the root folder ("") when a chat
        # opens there; the page's handler closes it (tests/e2e/conftest.py blank_page).

        send(page, "@Crystal /help")
        help_list = page.locator(f"{MESSAGES} li", has_text="this list")
        help_list.first.wait_for(timeout=180_000)
        items = page.locator(f"{MESSAGES} .jp-chat-rendered-message li")
        texts = items.all_inner_texts()
        assert "/help: this list" in texts, texts
        assert "/jobs, /logs JOB [--follow], /stop JOB: background jobs" in texts, texts
        assert page.locator(f"{MESSAGES} .jp-chat-rendered-message li code", has_text="/mode plan|work").count() == 1
        page.screenshot(path=str(SHOTS / "jupyter-ai-help.png"))
        assert lab.server.bodies() == [], "the command reached the model"

        send(page, "@Crystal Say hello.")
        page.locator(f"{MESSAGES} .jp-chat-rendered-message", has_text=ANSWER).first.wait_for(timeout=180_000)
        page.screenshot(path=str(SHOTS / "jupyter-ai-answer.png"))
    assert len(lab.server.bodies("chat")) == 1
