"""A real ``jupyter lab`` on 127.0.0.1 with the Crystal lab and server extensions and the
Crystal kernel, driven by Debian's chromium through Python playwright (DESIGN.md).

One lab per test module: a private HOME/CRYSTAL_HOME, a private root folder, the
kernelspec and the freshly built lab extension found through JUPYTER_PATH, and the
kernel pointed at an in-process loopback model server the tests script. Screenshots go
to tests/e2e/artifacts/.
"""

from __future__ import annotations

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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "crystal_kernel" / "labextension"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("CRYSTAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]
KEY_ENV = "CRYSTAL_TEST_KEY"


def ensure_built() -> None:
    """The e2e tests run the lab extension built from this checkout: build it when it
    is missing or older than its sources (jlpm build, a few seconds once installed)."""
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
            return json.loads(response.read())


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    ensure_built()
    with running_lab(tmp_path_factory.mktemp("lab")) as started:
        yield started


@contextmanager
def running_lab(base: Path, *, collaborative: bool = False, extra_args: tuple[str, ...] = (),
                server: LLMServer | None = None, env_extra: dict[str, str] | None = None,
                app: str = "jupyterlab") -> Iterator[Lab]:
    """A lab in ``base``. Real-time collaboration (jupyter-collaboration, a test
    dependency) is off unless ``collaborative``: the other browser tests check the
    person's plain, file-backed notebook. ``extra_args`` go to ``jupyter lab`` (e.g.
    ``--gateway-url``); ``server`` is a model server the caller started and stops;
    ``env_extra`` is added to the lab's environment. ``app="notebook"``: Jupyter Notebook 7
    instead of JupyterLab, with the same extensions."""
    root, home, data = base / "root", base / "home", base / "jupyter"
    root.mkdir()
    (home / ".crystal").mkdir(parents=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False, "approval": "full"}))
    # The kernelspec and the lab extension under test, first on JUPYTER_PATH.
    (data / "kernels" / "crystal").mkdir(parents=True)
    (data / "kernels" / "crystal" / "kernel.json").write_text(json.dumps(kernel_json(python=sys.executable)))
    (data / "labextensions").mkdir()
    os.symlink(BUILT, data / "labextensions" / "crystal-kernel")
    # The server extension is enabled by the same config file the package installs.
    (base / "config" / "jupyter_server_config.d").mkdir(parents=True)
    shutil.copy(ROOT / "jupyter-config" / "server-config" / "crystal_kernel.json",
                base / "config" / "jupyter_server_config.d" / "crystal_kernel.json")
    # No news prompt popping over the page in screenshots.
    (base / "config" / "labconfig").mkdir(parents=True)
    (base / "config" / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    token = secrets.token_hex(16)
    port = free_port()
    own_server = server is None
    if server is None:
        server = LLMServer(max_hang=20)
        server.start()
    env = server_env(base, home, data, server)
    env.update(env_extra or {})
    log = base / "lab.log"
    lab_only = ["--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    argv = [
        sys.executable, "-m", app, "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
        *(lab_only if app == "jupyterlab" else ["--JupyterNotebookApp.expose_app_in_browser=True"]),
        f"--YDocExtension.disable_rtc={not collaborative}", *extra_args,
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
            except OSError:
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


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium (see docs/jupyterlab.md).")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=60_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    yield page
    context.close()


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
