"""FORM-2 with real-time collaboration (jupyter-collaboration): the cell's execution
state lives in the shared document, so a page reloaded mid-turn finds the cell ``[*]``
that the page now gone set, and that page's ``execute_reply`` never comes. The lab
extension ends it right (labextension/src/forms.ts): once the kernel goes idle for that
cell's request the cell shows its execution count, not ``[*]`` forever. Real JupyterLab
+ Chromium, typing at a person's pace; screenshots tests/e2e/artifacts/reload-rtc-*.png."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import (
    NB,
    READY,
    blank_page,
    ensure_built,
    run_saved_then_reload,
    running_lab,
    shots_in_both_themes,
    type_in_last_cell,
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """This module's lab runs with real-time collaboration on."""
    ensure_built()
    with running_lab(tmp_path_factory.mktemp("lab-rtc-reload"), collaborative=True) as started:
        yield started


def settle(page) -> None:
    """Wait until the shared document has loaded (a busy machine may ask to keep waiting)."""
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.ready; }")
    waiting = page.locator(".jp-Dialog button", has_text="Continue waiting")
    if waiting.count():
        waiting.first.click()
        page.locator(".jp-Dialog").wait_for(state="detached")


def test_after_a_reload_mid_turn_the_shared_cell_ends_with_its_count(browser, lab):
    lab.api("PUT", "api/contents/shared.ipynb", {"type": "notebook", "format": "json", "content": {
        "cells": [], "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "crystal", "display_name": "Crystal", "language": "markdown"}}}})
    with blank_page(browser) as page:
        page.goto(f"{lab.url}lab/tree/shared.ipynb?reset&token={lab.token}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        settle(page)
        type_in_last_cell(page, "/approval default")
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        lab.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo shared"}}]},
                       {"text": "Ran it in the shared notebook."})
        run_saved_then_reload(page, "Run it in the shared notebook", "Allow once")
        settle(page)
        cell = page.locator(f"{NB} .jp-Cell", has_text="Run it in the shared notebook").first
        prompt = cell.locator(".jp-InputPrompt")
        button = cell.locator(".jupyter-button", has_text="Allow once")
        button.wait_for(timeout=60_000)
        assert prompt.inner_text().strip() == "[*]:"
        button.click()
        cell.get_by_text("Ran it in the shared notebook.").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        page.wait_for_function("(el) => el.innerText.trim() === '[2]:'", arg=prompt.element_handle(), timeout=20_000)
        shots_in_both_themes(page, "reload-rtc-count")
