"""An approval form that appears below the fold is scrolled into view (GUARD-4: the
person must see what waits for them), in real JupyterLab + Chromium at 1400x900."""

from __future__ import annotations

from tests.e2e.conftest import ARTIFACTS, NB, READY, new_crystal_notebook, type_and_run


def test_an_approval_form_below_the_fold_is_scrolled_into_view(browser, lab):
    with new_crystal_notebook(browser, lab) as page:
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
