"""A notebook's session follows the notebook (SPEC §13 "Notebook identity") in real
JupyterLab + Chromium: a new Crystal notebook named on first save (JupyterLab's rename
dialog), then its kernel restarted — the next cell continues its session, says so in
one line, and the model receives the earlier conversation."""

from __future__ import annotations

from tests.e2e.conftest import ARTIFACTS, DELAY, NB, READY, new_crystal_notebook, type_and_run


def user_texts(body) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def test_rename_on_first_save_then_restart_continues_the_session(browser, lab):
    with new_crystal_notebook(browser, lab) as page:
        lab.server.add({"text": "Noted: zebra."})
        type_and_run(page, "Remember the word zebra.")
        page.locator(NB).get_by_text("Noted: zebra.").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=60_000)

        # First save: JupyterLab asks for a name (its rename dialog).
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        dialog = page.locator(".jp-Dialog input[type=text]")
        dialog.wait_for()
        page.keyboard.type("zoo", delay=DELAY)  # replaces the selected "Untitled", keeps ".ipynb"
        page.locator(".jp-Dialog .jp-mod-accept").click()
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.context.path === 'zoo.ipynb'")
        path = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path")
        page.wait_for_timeout(1000)
        saved = lab.api("GET", f"api/contents/{path}")  # the file as saved on disk
        session_id = saved["content"]["metadata"]["crystal"]["session_id"]

        # Restart the kernel (Kernel menu's restart, confirmed in its dialog).
        page.evaluate("() => { void window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
        page.locator(".jp-Dialog .jp-mod-accept").click()
        page.wait_for_timeout(1500)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        lab.server.add({"text": "It was zebra."})
        type_and_run(page, "Which word was it?")
        note = page.locator(NB).get_by_text("Continuing this notebook's session")
        note.wait_for(timeout=60_000)
        page.locator(NB).get_by_text("It was zebra.").wait_for(timeout=60_000)
        assert session_id in note.inner_text()
        assert user_texts(lab.server.bodies("chat")[-1])[-2:] == ["Remember the word zebra.", "Which word was it?"]
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "notebook-identity-after-restart.png"))
