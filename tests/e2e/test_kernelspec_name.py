"""The lab extension recognises a Crystal kernel by its kernelspec, whatever its name
(labextension/src/kernelspec.ts): a kernelspec installed as ``crystal-ollama`` (as
``crystal kernel install --name crystal-ollama`` does) gets the status bar item, wrapped
prompt lines and the notebook's session kept in its metadata, and its status item comes
back after a page reload — in real JupyterLab + Chromium."""

from __future__ import annotations

import json
import shutil
import sys

from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.folder_shared import SHARED_IN_FOLDER
from tests.e2e.conftest import ARTIFACTS, DELAY, NB, READY

OTHER = "crystal-ollama"


def test_a_crystal_kernelspec_under_another_name_gets_the_extension(browser, lab):
    spec = kernel_json(python=sys.executable, display_name="Crystal (ollama)")
    spec["env"] = {"CRYSTAL_BASE_URL": lab.server.base_url, SHARED_IN_FOLDER: ""}
    folder = lab.root.parent / "jupyter" / "kernels" / OTHER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(f"{lab.url}lab?token={lab.token}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
        names = page.evaluate("async () => { const m = window.jupyterapp.serviceManager.kernelspecs; "
                              "await m.refreshSpecs(); return Object.keys(m.specs.kernelspecs); }")
        assert OTHER in names, names
        # The launcher's Notebook tile for that kernelspec (the first of its two tiles).
        page.locator(".jp-LauncherCard", has_text="Crystal (ollama)").first.click(timeout=60_000)
        page.wait_for_function(READY, arg=OTHER, timeout=90_000)
        status = page.locator(".jp-crystal-status")
        status.wait_for(timeout=30_000)
        page.wait_for_function("() => /work/.test(document.querySelector('.jp-crystal-status').textContent)")

        lab.server.add({"text": "Hello from the other kernelspec."})
        prompt = "Please read the whole sales table and tell me which " + "rather long " * 12 + "column matters"
        page.locator(f"{NB} .jp-Cell.jp-mod-active .cm-content").click()
        page.keyboard.type(prompt, delay=DELAY // 6)
        wraps = page.evaluate(f"() => !!document.querySelector('{NB} .jp-Cell.jp-mod-active .cm-lineWrapping')")
        assert wraps, "a long prompt wraps instead of scrolling sideways"
        page.keyboard.press("Shift+Enter")
        page.locator(NB).get_by_text("Hello from the other kernelspec.").wait_for(timeout=60_000)
        session = page.evaluate("() => (window.jupyterapp.shell.currentWidget.content.model"
                                ".getMetadata('crystal') || {}).session_id")
        assert isinstance(session, str) and session, "the notebook keeps its session (forms.ts)"
        # After a reload the item says the session's state again, not "starting" (it
        # asks once the kernelspecs and the notebook's session are back).
        page.on("dialog", lambda dialog: dialog.accept())
        page.reload()
        page.wait_for_function(READY, arg=OTHER, timeout=90_000)
        try:
            page.wait_for_function("() => { const el = document.querySelector('.jp-crystal-status');"
                                   " return !!el && el.offsetParent !== null && /work/.test(el.textContent); }")
        except Exception:
            raise AssertionError("the status item says " + repr(page.evaluate(
                "() => { const el = document.querySelector('.jp-crystal-status');"
                " return el && [el.textContent, el.offsetParent !== null]; }"))) from None
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "kernelspec-other-name.png"))
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "FAILED-kernelspec-other-name.png"))
        raise
    finally:
        context.close()
        # The lab is shared: the next modules see only the kernelspecs they expect.
        shutil.rmtree(folder, ignore_errors=True)
