"""An approval form that appears below the fold is scrolled into view (GUARD-4: the
person must see what waits for them), in real JupyterLab + Chromium at 1400x900."""

from __future__ import annotations

from tests.e2e.conftest import ARTIFACTS, DELAY, NB, READY


def type_and_run(page, text: str) -> None:
    page.locator(f"{NB} .jp-Cell.jp-mod-active .cm-content").click()
    page.keyboard.type(text, delay=DELAY)
    page.keyboard.press("Shift+Enter")


def test_an_approval_form_below_the_fold_is_scrolled_into_view(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(f"{lab.url}lab?token={lab.token}")
        page.locator(".jp-LauncherCard", has_text="New Crystal Notebook").click(timeout=90_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        type_and_run(page, "/approval default")
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        # A long answer first, then the call: the form lands far below the first screen.
        long_text = "\n\n".join(f"Step {n}: looking at the build folder." for n in range(1, 61))
        lab.server.add({"text": long_text, "tool_calls": [{"name": "bash", "arguments": {"command": "ls build"}}]},
                       {"text": "Listed."})
        type_and_run(page, "Look at the build folder")
        allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once")
        allow.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)  # the smooth scroll
        box = allow.bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "approval-form-into-view.png"))
        allow.click()
        page.locator(NB).get_by_text("Listed.").wait_for(timeout=60_000)
    finally:
        context.close()
