"""A real ``jupyter lab`` on 127.0.0.1 with the Crystal lab and server extensions and the
Crystal kernel, driven by Debian's chromium through Python playwright (DESIGN.md).

A lab has a private HOME/CRYSTAL_HOME, a private root folder, the kernelspec and the
freshly built lab extension found through JUPYTER_PATH, and its kernels pointed at an
in-process loopback model server the tests script. Screenshots go to tests/e2e/artifacts/.

The modules that use the plain ``lab`` fixture share one ``jupyter lab`` (starting one
costs ~13 s and ~8 s of CPU at load 6, with Jupyter AI off): one per pytest process, so
`make test`'s workers that run their groups (tests/parallel.py) have one each. Each module uses it on its own terms: its own model server
(the kernelspecs' env names it), the root folder to itself (what the last module left
there is moved out of the root), its own kernels (shut down when the module ends), and a
fresh Crystal Home, lab workspace and lab settings. Modules that need a differently
configured lab (real-time collaboration, a gateway, Notebook 7) start their own with
:func:`running_lab`. Every module of the folder shares one chromium (and playwright's
driver) per pytest process the same way; each test opens a browser context of its own,
and the contexts a module leaves are closed when it ends.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.jupyter.kernelspec import kernel_json, write_kernelspec
from crystal_kernel.testing.folder_shared import SHARED_IN_FOLDER, FolderShared
from crystal_kernel.testing.llm_server import LLMServer
from tests.e2e.contrast import set_theme

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "crystal_kernel" / "labextension"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
LAZY = Path(__file__).resolve().parent / "lazy"
CHROMIUM = os.environ.get("CRYSTAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
    # Headless chromium still builds each new window's address-bar popup, a WebUI page in a
    # renderer of its own (~1 CPU-s for every browser context the tests open); none is shown.
    # Chromium keeps only the last --disable-features, so this one repeats the features
    # playwright's own switch turns off (playwright 1.65, chromiumSwitches.ts).
    "--disable-features=" + ",".join([
        "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
        "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
        "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin",
        "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
        "WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup"]),
]
KEY_ENV = "CRYSTAL_TEST_KEY"
# What jupyter-ai 3 adds to every Jupyter in this environment (off in labs by default).
JUPYTER_AI_SERVER_EXTENSIONS = (
    "jupyter_ai_acp_client", "jupyter_ai_chat_commands", "jupyter_ai_litellm", "jupyter_ai_persona_manager",
    "jupyter_ai_router",
    "jupyter_ai_tools", "jupyter_live_content", "jupyter_server_mcp", "jupyterlab_chat",
    "jupyterlab_commands_toolkit",
)
JUPYTER_AI_LAB_EXTENSIONS = (
    "@jupyter-ai/acp-client", "@jupyter-ai/chat-commands", "@jupyter-ai/persona-manager", "@jupyter-ai/router",
    "@jupyter-ai-contrib/live-content", "jupyterlab-chat-extension", "jupyterlab-ai-commands",
    "jupyterlab-cell-input-footer-extension", "jupyterlab-commands-toolkit", "jupyterlab-diff",
)


def ensure_built() -> None:
    """The e2e tests run the lab extension built from this checkout: build it when it
    is missing or older than its sources (jlpm build, a few seconds once installed).
    One build at a time: `make test` runs the browser tests on several parallel workers
    (tests/parallel.py), and two builds in one folder break each other."""
    with open(ROOT / "labextension" / ".crystal-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        _build_if_stale()


def _build_if_stale() -> None:
    marker = BUILT / "package.json"
    sources = [p for folder in ("src", "style") for p in (ROOT / "labextension" / folder).rglob("*") if p.is_file()]
    sources.append(ROOT / "labextension" / "package.json")
    if marker.exists() and (BUILT / "static" / "style.js").exists():
        if max(p.stat().st_mtime for p in sources) <= marker.stat().st_mtime:
            return
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=str(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    folder = ROOT / "labextension"
    if not (folder / "node_modules").is_dir():
        subprocess.run([str(bin_dir / "jlpm"), "install"], cwd=folder, env=env, check=True, timeout=900)
    subprocess.run([str(bin_dir / "jlpm"), "build"], cwd=folder, env=env, check=True, timeout=600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    home: Path
    server: LLMServer
    log: Path

    def api(self, method: str, path: str, body: object | None = None) -> object:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None  # DELETE answers 204, no body


@dataclass
class SharedLab:
    """The lab the modules of this folder share; ``lab.server`` is a model server no
    module scripts (each module's kernels are pointed at the module's own)."""

    lab: Lab
    base: Path
    stack: ExitStack


_shared_lab: FolderShared[SharedLab] = FolderShared(Path(__file__).resolve().parent)


def start_shared_lab(base: Path) -> SharedLab:
    stack = ExitStack()
    try:
        nobody = stack.enter_context(LLMServer(max_hang=1))
        lab = stack.enter_context(running_lab(base, server=nobody, env_extra=_shared_lab.env()))
    except BaseException:
        stack.close()
        raise
    return SharedLab(lab, base, stack)


#: pytest-timeout's limit for a browser test that sets none (the suite's default is 120 s):
#: each step of these tests has its own bounded wait, so this is only a guard against a
#: hang, and a test on a loaded CI machine (three browsers beside the other workers) must
#: not fail on the sum of steps that each kept their bound.
BROWSER_TEST_TIMEOUT = 600


def pytest_collection_modifyitems(items):
    here = Path(__file__).resolve().parent
    for item in items:
        if item.path.is_relative_to(here) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(BROWSER_TEST_TIMEOUT))


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop the shared lab and browser after the folder's last test: after the module
    fixtures (which end the module's kernels through the lab), before tests/conftest.py
    looks for leftovers."""
    try:
        return (yield)
    finally:
        try:
            _shared_lab.teardown(nextitem)
        finally:
            _shared_browser.teardown(nextitem)


@pytest.fixture(scope="module")
def lab(request, tmp_path_factory) -> Iterator[Lab]:
    """This module's view of the shared lab, with its own model server."""
    ensure_built()
    shared = _shared_lab.get(lambda: start_shared_lab(tmp_path_factory.mktemp("lab")), lambda s: s.stack.close())
    with LLMServer(max_hang=20) as server:
        write_kernelspecs(shared.base / "jupyter", server)
        try:
            yield replace(shared.lab, server=server)
        finally:
            end_module(shared, request.module.__name__)


def write_kernelspecs(data: Path, server: LLMServer | None) -> None:
    """The crystal and python3 kernelspecs of a lab; with ``server``, their kernels talk to
    it, and they are not taken for the shared lab itself by tests/conftest.py's check for
    leftover processes (a kernel a module leaves running is a leftover like any other)."""
    crystal = kernel_json(python=sys.executable)
    python3 = json.loads((Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    for name, spec in (("crystal", crystal), ("python3", python3)):
        if server is not None:
            spec["env"] = {"CRYSTAL_BASE_URL": server.base_url, SHARED_IN_FOLDER: ""}
        if name == "crystal":
            write_kernelspec(data / "kernels" / name, spec)  # with its logo, as installed
        else:
            (data / "kernels" / name).mkdir(parents=True, exist_ok=True)
            (data / "kernels" / name / "kernel.json").write_text(json.dumps(spec))


def end_module(shared: SharedLab, module: str) -> None:
    """Shut down the module's kernels and leave the lab as a fresh one for the next
    module: empty root (the module's files move to ``base/modules/<module>``), fresh
    Crystal Home, no saved lab workspace or settings, kernels pointed at nobody."""
    lab = shared.lab
    # All at once, as a stopping server does: one after the other, each kernel's graceful
    # shutdown (a few seconds under load) adds up over a module's notebooks.
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda s: lab.api("DELETE", f"api/sessions/{s['id']}"), lab.api("GET", "api/sessions")))
        list(pool.map(lambda k: lab.api("DELETE", f"api/kernels/{k['id']}"), lab.api("GET", "api/kernels")))
    write_kernelspecs(shared.base / "jupyter", None)
    done = shared.base / "modules" / module
    done.mkdir(parents=True)
    for entry in list(lab.root.iterdir()):
        shutil.move(str(entry), str(done / entry.name))
    shutil.rmtree(lab.home)
    write_home(lab.home)
    for folder in ("workspaces", "user-settings"):
        shutil.rmtree(shared.base / "config" / "lab" / folder, ignore_errors=True)


def write_home(crystal_home: Path) -> None:
    crystal_home.mkdir(parents=True)
    # Inline completions (NB-2) off: a lab's server would otherwise ask the model as the
    # tests type, and take replies scripted for turns. tests/e2e/test_inline_completion.py
    # turns them on in its own lab.
    (crystal_home / "config.json").write_text(json.dumps(
        {"topicNaming": False, "approval": "full", "inlineCompletion": "off"}))


@contextmanager
def running_lab(base: Path, *, collaborative: bool = False, extra_args: tuple[str, ...] = (),
                server: LLMServer | None = None, env_extra: dict[str, str] | None = None,
                app: str = "jupyterlab", jupyter_ai: bool = False) -> Iterator[Lab]:
    """A lab in ``base``. Real-time collaboration (jupyter-collaboration, a test
    dependency) is off unless ``collaborative``: the other browser tests check the
    person's plain, file-backed notebook. ``extra_args`` go to ``jupyter lab`` (e.g.
    ``--gateway-url``); ``server`` is a model server the caller started and stops;
    ``env_extra`` is added to the lab's environment. ``app="notebook"``: Jupyter Notebook 7
    instead of JupyterLab, with the same extensions. Jupyter AI (a test dependency) is
    off unless ``jupyter_ai``: its chat panel and server extensions are not what the
    other browser tests look at, and cost seconds of every start."""
    root, home, data = base / "root", base / "home", base / "jupyter"
    root.mkdir()
    write_home(home / ".crystal")
    # The kernelspecs and the lab extension under test, first on JUPYTER_PATH.
    write_kernelspecs(data, None)
    (data / "labextensions").mkdir()
    os.symlink(BUILT, data / "labextensions" / "crystal-kernel")
    # The server extension is enabled by the same config file the package installs.
    (base / "config" / "jupyter_server_config.d").mkdir(parents=True)
    shutil.copy(ROOT / "jupyter-config" / "server-config" / "crystal_kernel.json",
                base / "config" / "jupyter_server_config.d" / "crystal_kernel.json")
    # No news prompt popping over the page in screenshots.
    (base / "config" / "labconfig").mkdir(parents=True)
    disabled = {"@jupyterlab/apputils-extension:announcements": True}
    if not jupyter_ai:
        disabled.update(dict.fromkeys(JUPYTER_AI_LAB_EXTENSIONS, True))
        (base / "config" / "jupyter_server_config.json").write_text(json.dumps(
            {"ServerApp": {"jpserver_extensions": dict.fromkeys(JUPYTER_AI_SERVER_EXTENSIONS, False)}}))
    # buildCheck: no "is the lab's build up to date?" request on every page load (the server
    # answers it with node and yarn subprocesses, ~1 CPU-s); the lab is never rebuilt here.
    (base / "config" / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": disabled, "buildCheck": False, "buildAvailable": False}))
    # A steady text cursor: the blinking one is a CSS animation that repaints the page
    # (renderer and GPU process) all the time a cell is in edit mode, ~0.08 CPU-s a
    # second, while the tests wait on kernels and answers. No test looks at the blink.
    (base / "config" / "labconfig" / "default_setting_overrides.json").write_text(json.dumps(
        {"@jupyterlab/codemirror-extension:plugin": {"defaultConfig": {"cursorBlinkRate": 0}}}))
    token = secrets.token_hex(16)
    port = free_port()
    own_server = server is None
    if server is None:
        server = LLMServer(max_hang=20)
        server.start()
    env = server_env(base, home, data, server)
    env.update(env_extra or {})
    log = base / "lab.log"
    # The read-only extension manager: the PyPI one asks yarn for its registry at every
    # start (a node subprocess); nothing here installs extensions.
    lab_only = ["--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly"]
    argv = [
        sys.executable, "-m", app, "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
        *(lab_only if app == "jupyterlab" else ["--JupyterNotebookApp.expose_app_in_browser=True"]),
        f"--YDocExtension.disable_rtc={not collaborative}",
        # Jupyter AI's MCP server: a free port, not 3001 (labs of parallel tests would clash).
        "--MCPExtensionApp.mcp_port=0",
        # No language servers are installed: jupyter-lsp's search for them (npm prefix -g,
        # a node subprocess at every start) finds none.
        "--LanguageServerManager.autodetect=False", *extra_args,
    ]
    url = f"http://127.0.0.1:{port}/"
    try:
        with served(argv, cwd=root, env=env, log=log, ready=f"{url}api/status?token={token}", what="jupyter lab"):
            yield Lab(url, token, root, home / ".crystal", server, log)
    finally:
        if own_server:
            server.stop()


def server_env(base: Path, home: Path, data: Path, server: LLMServer) -> dict[str, str]:
    """The environment of a lab or gateway in ``base``: a private HOME, Crystal pointed at
    the loopback model server, Jupyter's paths inside ``base``, no real keys."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CRYSTAL_ARGS", "CRYSTAL_APPROVAL", "JUPYTER_CONFIG_DIR")}
    env.update({
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "JUPYTER_PATH": str(data),
        "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "CRYSTAL_PROVIDER": "openai", "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url,
        "CRYSTAL_API_KEY_ENV": KEY_ENV, KEY_ENV: "test-key",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        # rfc3987_syntax imported when first used, not at every start (tests/e2e/lazy).
        "PYTHONPATH": os.pathsep.join([str(LAZY), *filter(None, [os.environ.get("PYTHONPATH")])]),
    })
    return env


@contextmanager
def served(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path, ready: str, what: str,
           headers: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """Start a server process (output to ``log``), wait up to 60 s until ``ready``
    answers, and end its whole process group afterwards."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(urllib.request.Request(ready, headers=headers or {}), timeout=2):
                    break
            except (OSError, http.client.HTTPException):  # not up yet, or another listener's port
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{what} did not start:\n{log.read_text()[-4000:]}") from None
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


DELAY = 60  # ms between keys, a person's pace
NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on screen (others may be open in tabs)
# The current notebook's kernel is ``name``, connected and idle.
READY = """(name) => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.name === name && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def run_saved_then_reload(page, prompt: str, button: str, kernel: str = "crystal") -> None:
    """FORM-2's reload: type ``prompt`` into the notebook's last cell at a person's pace,
    save (the cell is saved; its outputs will not be), run it, wait until the form shows
    ``button``, then reload the page (accepting the leave-page dialog) and wait until the
    notebook's kernel is connected again (busy: its turn still waits for the answer)."""
    page.locator(f"{NB} .jp-Cell .cm-content").last.click()
    page.keyboard.type(prompt, delay=DELAY)
    page.keyboard.press("Control+s")
    page.wait_for_timeout(1000)
    page.keyboard.press("Shift+Enter")
    page.locator(f"{NB} .jupyter-button", has_text=button).wait_for(timeout=60_000)
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    page.wait_for_function(READY.replace("k.status === 'idle'", "true"), arg=kernel, timeout=90_000)


@dataclass
class SharedBrowser:
    """The chromium the modules of this folder share, and the playwright driver behind it."""

    playwright: Any
    browser: Any

    def stop(self) -> None:
        try:
            self.browser.close()
        finally:
            self.playwright.stop()


_shared_browser: FolderShared[SharedBrowser] = FolderShared(Path(__file__).resolve().parent)


def start_shared_browser() -> SharedBrowser:
    """Playwright's driver and one chromium, both carrying :data:`SHARED_IN_FOLDER` (the
    driver is started with this process's environment and chromium inherits the driver's),
    so tests/conftest.py's check for leftover processes leaves them alone between modules."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium (see docs/jupyterlab.md).")
    saved = {name: os.environ.get(name) for name in _shared_browser.env()}
    os.environ.update(_shared_browser.env())
    try:
        playwright = sync_playwright().start()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        return SharedBrowser(playwright, playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True))
    except BaseException:
        playwright.stop()
        raise


@pytest.fixture(scope="module")
def browser():
    """The folder's chromium (starting one and playwright's driver costs ~2-3 s of CPU, paid
    once per worker instead of once per module); a module gets it with no context open and
    leaves none: whatever contexts (and so pages) it left are closed when it ends, as
    closing a browser of its own would."""
    shared = _shared_browser.get(start_shared_browser, SharedBrowser.stop)
    if not shared.browser.is_connected():  # it crashed in an earlier module: a new one
        _shared_browser.teardown(None)
        shared = _shared_browser.get(start_shared_browser, SharedBrowser.stop)
    try:
        yield shared.browser
    finally:
        for context in list(shared.browser.contexts):
            context.close()


@contextmanager
def blank_page(browser) -> Iterator:
    """A page in a fresh browser context (closed afterwards) that has loaded nothing yet.

    JupyterLab's own "Directory not found" dialog (a folder listing that met a notebook
    jupyter-collaboration was writing in place, or Jupyter AI's chat at the root folder
    "") is closed whenever it stands in the way, as a person would: it is not Crystal's,
    and its modal backdrop would take every click meant for the notebook."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.add_locator_handler(page.locator(".jp-Dialog", has_text="Directory not found"),
                             lambda dialog: dialog.locator(".jp-Dialog-footer button").first.click())
    try:
        yield page
    finally:
        context.close()


@contextmanager
def new_crystal_notebook(browser, lab) -> Iterator:
    """A fresh page at 1400x900 with a new Crystal notebook opened from the launcher,
    its kernel ready (closed afterwards)."""
    with blank_page(browser) as page:
        page.set_default_timeout(30_000)
        page.goto(f"{lab.url}lab?token={lab.token}")
        # A module's earlier notebook may be restored instead of the launcher: open one.
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=90_000)
        page.evaluate("async () => { await window.jupyterapp.restored; "
                      "if (!document.querySelector('.jp-LauncherCard')) "
                      "await window.jupyterapp.commands.execute('launcher:create'); }")
        page.locator(".jp-LauncherCard", has_text="New Crystal Notebook").click(timeout=90_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        yield page


def type_and_run(page, text: str) -> None:
    """Type ``text`` into the active cell at a person's pace and run it."""
    page.locator(f"{NB} .jp-Cell.jp-mod-active .cm-content").click()
    page.keyboard.type(text, delay=DELAY)
    page.keyboard.press("Shift+Enter")


def type_in_last_cell(page, text: str) -> None:
    """Type ``text`` into the notebook's last cell at a person's pace (line by line: a new
    line starts at the left whatever the editor indents) and run it with Shift+Enter."""
    page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget.content;"
                  " nb.activeCellIndex = nb.widgets.length - 1; }")
    page.locator(f"{NB} .jp-Cell.jp-mod-active .cm-content").click()
    for i, line in enumerate(text.split("\n")):
        if i:
            page.keyboard.press("Enter")
            page.keyboard.press("Home")
        page.keyboard.type(line, delay=DELAY)
    page.keyboard.press("Shift+Enter")


def shots_in_both_themes(page, name: str) -> None:
    """``artifacts/{name}-light.png`` (the page as it is: the labs start light) and
    ``-dark.png``; the page is left in the light theme. The light one is not switched to
    first: a theme switch redraws the editors, which an inline completion answers again."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-light.png"))
    set_theme(page, "JupyterLab Dark")
    page.screenshot(path=str(ARTIFACTS / f"{name}-dark.png"))
    set_theme(page, "JupyterLab Light")


@pytest.fixture
def page(browser, lab):
    with blank_page(browser) as page:
        page.goto(f"{lab.url}lab?token={lab.token}")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=60_000)
        page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
        yield page


@pytest.fixture
def shot(page):
    """``shot("name")`` saves a screenshot of the page under tests/e2e/artifacts/."""

    def take(name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path))
        return path

    return take


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test leaves a screenshot of its page and the lab's log tail in
    tests/e2e/artifacts/ (taken here, while the test's fixtures are still alive), so a
    CI failure can be read afterwards."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    ARTIFACTS.mkdir(exist_ok=True)
    name = item.name
    for fixture in ("page", "notebook_page"):
        value = item.funcargs.get(fixture)
        if value is None:
            continue
        page = value[0] if isinstance(value, tuple) else value
        try:
            page.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"))
        except Exception as exc:  # the page may be gone; the log still helps
            print(f"no screenshot: {exc}")
    lab = item.funcargs.get("lab")
    if lab is not None:
        (ARTIFACTS / f"FAILED-{name}.log").write_text(lab.log.read_text(errors="replace")[-20000:])


def make_notebook(lab, name: str, kernel: str = "crystal") -> None:
    """An empty notebook ``name`` for ``kernel`` in the lab's root, made through its API."""
    language = "python" if kernel == "python3" else "markdown"
    lab.api("PUT", f"api/contents/{name}", {"type": "notebook", "format": "json", "content": {
        "cells": [], "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": language}}}})


def open_notebook(page, lab, name: str, kernel: str = "crystal") -> None:
    """Open ``name`` alone (?reset: not every notebook earlier tests left open) and wait
    until its kernel is idle and the notebook has loaded."""
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.wait_for_function(READY, arg=kernel, timeout=90_000)
    page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)


def run_cell(page, text: str) -> None:
    """Type a new cell at the end (lines joined with Enter) and run it with Shift+Enter."""
    page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)  # the notebook has loaded
    editor = page.locator(f"{NB} .jp-Cell .cm-content").last
    editor.wait_for(state="visible", timeout=60_000)
    editor.click(timeout=60_000)
    for i, line in enumerate(text.split("\n")):
        if i:
            page.keyboard.press("Enter")
            page.keyboard.press("Home")  # no auto-indent carried over
        page.keyboard.type(line)
    page.keyboard.press("Shift+Enter")


def bash_then(command: str, answer: str) -> tuple[dict, dict]:
    """The model's replies: one bash call, then ``answer``."""
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": answer}
