"""Jupyter Notebook 7 (``jupyter notebook``) runs on JupyterLab components and loads the
Crystal lab extension, so reload recovery works there too (FORM-2; docs/jupyterlab.md,
which front ends recover): a never-saved Crystal notebook reloaded while a question
waits gets its running cell and form back, and answering it completes the cell."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import READY, ensure_built, make_notebook, running_lab
from tests.e2e.test_forms import reload_unsaved_and_answer


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory):
    ensure_built()
    with running_lab(tmp_path_factory.mktemp("nb7"), app="notebook") as started:
        yield started


@pytest.mark.timeout(600)
def test_notebook7_reload_of_a_never_saved_notebook_brings_the_running_cell_back(browser, notebook7):
    lab = notebook7
    make_notebook(lab, "nb7.ipynb", "crystal")
    page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{lab.url}notebooks/nb7.ipynb?token={lab.token}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        reload_unsaved_and_answer(page, lab, "nb7.ipynb", "Ask me in Notebook 7", "notebook7-unsaved-reload")
    finally:
        page.context.close()
