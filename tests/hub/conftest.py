"""A real JupyterHub for the hub tests: real Unix users, each person's server run as that
person by the LocalProcessSpawner, DummyAuthenticator with a password (no network), the
proxy ``configurable-http-proxy`` from build/hub (``make hub-deps``), and Crystal's
``jupyterhub_config.py`` taken from docs/deploy.md as written, followed by the lines a test
hub needs (ports, users, the loopback model server, this checkout's venv and kernelspec).

Everything a person's server reads (the kernelspec, the lab extension, the team's prompt
set) is in a folder all users can read; the hub's own folder (its database, the key
files) is root's alone, as on a real hub. The users and their homes are removed at the end.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from crystal_kernel.jupyter.kernelspec import kernel_json, write_kernelspec
from crystal_kernel.testing.llm_server import LLMServer
from tests.e2e.conftest import (
    BUILT,
    CHROMIUM,
    CHROMIUM_FLAGS,
    DELAY,
    JUPYTER_AI_LAB_EXTENSIONS,
    JUPYTER_AI_SERVER_EXTENSIONS,
    NB,
    READY,
    ensure_built,
    free_port,
)
from tests.hub.acl import closed_folders, passable_by

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy.md"
VENV_BIN = Path(sys.executable).parent
CHP = ROOT / "build" / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
#: The bounded waits: a hub start, a person's server start (a single-user JupyterLab under load).
HUB_START = 90
SERVER_START = 180


def documented_config() -> str:
    """The ``jupyterhub_config.py`` block of docs/deploy.md, as a person copies it."""
    text = DEPLOY.read_text()
    found = re.search(r"`jupyterhub_config.py`:\n\n```python\n(.*?)```", text, re.S)
    assert found, "docs/deploy.md has no jupyterhub_config.py block"
    return found.group(1)


@dataclass
class Person:
    name: str
    password: str
    key: str              # the model key in the hub's key file for this person
    home: Path            # /home/<name>
    token: str = ""       # a hub API token of this person's own
    uid: int = 0

    @property
    def crystal_home(self) -> Path:
        return self.home / ".crystal"


@dataclass
class Hub:
    url: str              # the proxy's public URL, ending in /
    service_token: str    # the tests' admin service
    base: Path
    log: Path
    server: LLMServer
    people: dict[str, Person] = field(default_factory=dict)

    def api(self, method: str, path: str, token: str | None = None, body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """``(status, JSON body or text)`` of a request to ``url + path`` (no exception on 4xx),
        with ``token`` (default: the tests' admin service; ``""``: no Authorization header)."""
        request = urllib.request.Request(
            self.url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={**({"Authorization": f"token {token or self.service_token}"} if token != "" else {}),
                     **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")


def make_user(name: str) -> int:
    # A private home (HOME_MODE 0700), as docs/deploy.md asks: Debian's default is 0755,
    # where everyone could read the person's notebooks.
    subprocess.run(["useradd", "--create-home", "--key", "HOME_MODE=0700", "--shell", "/bin/bash", name],
                   check=True, timeout=30)
    return pwd.getpwnam(name).pw_uid


def remove_user(name: str) -> None:
    """End whatever still runs as ``name`` (processes the test's hub started for it), then
    remove the user and the home."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    for proc in psutil.process_iter(["uids"]):
        if proc.info["uids"] and proc.info["uids"].real == uid:
            try:
                proc.kill()
            except psutil.Error:
                pass
    subprocess.run(["userdel", "--remove", name], timeout=30, capture_output=True)


def shared_folder(path: Path) -> Path:
    """A folder every user can read (the test's own tmp folders are root's alone)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def write_shared(base: Path, server: LLMServer) -> tuple[Path, Path, Path]:
    """The kernelspec and lab extension (JUPYTER_PATH), the servers' Jupyter config and the
    team's prompt set, in folders the people can read; returns (data, config, prompt sets)."""
    data, config, sets = base / "jupyter", base / "config", base / "promptsets"
    for folder in (data / "kernels", data / "labextensions", config / "labconfig", sets / "team"):
        shared_folder(folder)
    spec = kernel_json(python=sys.executable)
    write_kernelspec(data / "kernels" / "crystal", spec)
    for path in (data / "kernels" / "crystal").rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (data / "kernels" / "crystal").chmod(0o755)
    os.symlink(BUILT, data / "labextensions" / "crystal-kernel")
    # Jupyter AI (in this venv for other tests) off: it is not under test, and costs each
    # server seconds at start; no news or build check on a page load.
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": dict.fromkeys(JUPYTER_AI_SERVER_EXTENSIONS, False)},
         "LabApp": {"news_url": "", "expose_app_in_browser": True, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
                    "extension_manager": "readonly"},
         "YDocExtension": {"disable_rtc": True}, "LanguageServerManager": {"autodetect": False}}))
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True,
                                **dict.fromkeys(JUPYTER_AI_LAB_EXTENSIONS, True)},
         "buildCheck": False, "buildAvailable": False}))
    (sets / "team" / "prompt.json").write_text(json.dumps({"name": "Team rules"}))
    (sets / "team" / "work.md").write_text("Follow the team rules of the hub.\n")
    for path in list(config.rglob("*")) + list(sets.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return data, config, sets


def hub_lines(hub_dir: Path, data: Path, config: Path, server: LLMServer, people: list[Person],
                ports: tuple[int, int, int], service_token: str) -> str:
    """The lines a test hub adds after the documented config."""
    port, hub_port, proxy_api = ports
    settings = {
        "people": [p.name for p in people], "password": people[0].password,
        "extra_env": {"CRYSTAL_BASE_URL": server.base_url, "JUPYTER_PATH": str(data),
                      "JUPYTER_CONFIG_PATH": str(config)},
    }
    return f"""
# ---- the test hub (tests/hub/conftest.py) ----
import json as _json
_t = _json.loads({json.dumps(json.dumps(settings))})
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.ConfigurableHTTPProxy.command = [{str(CHP)!r}]
c.ConfigurableHTTPProxy.pid_file = {str(hub_dir / "proxy.pid")!r}
c.JupyterHub.db_url = "sqlite:///{hub_dir / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(hub_dir / "cookie_secret")!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = _t["password"]
c.Authenticator.allowed_users = set(_t["people"])
c.Spawner.cmd = [{str(VENV_BIN / "jupyterhub-singleuser")!r}]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = {SERVER_START}
c.Spawner.http_timeout = {SERVER_START}
c.Spawner.environment.update(_t["extra_env"])
c.JupyterHub.services.append({{"name": "crystal-tests", "api_token": {service_token!r}}})
c.JupyterHub.load_roles.append({{"name": "crystal-tests", "services": ["crystal-tests"],
    "scopes": ["admin:users", "admin:servers", "tokens", "read:users", "access:servers"]}})
"""


def wait_for(what: str, check: Any, timeout: float, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s; hub log tail:\n{log.read_text()[-4000:]}")
        time.sleep(0.5)


def start_server(hub: Hub, person: Person) -> None:
    status, body = hub.api("POST", f"hub/api/users/{person.name}/server")
    assert status in (201, 202), f"{status} {body}; hub log tail:\n{hub.log.read_text()[-4000:]}"

    def ready() -> bool:
        return bool(server_of(hub, person).get("ready"))

    wait_for(f"{person.name}'s server is ready", ready, SERVER_START, hub.log)


class HubProcess:
    """The ``jupyterhub`` process of a test hub, which a test may restart (the proxy it
    started restarts with it; the people's servers keep running: the documented config
    sets ``cleanup_servers`` off)."""

    def __init__(self, hub: Hub, argv: list[str], env: dict[str, str]) -> None:
        self.hub, self.argv, self.env = hub, argv, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.hub.log, "ab") as out:
            self.proc = proc = subprocess.Popen(self.argv, cwd=self.hub.log.parent, env=self.env, stdout=out,
                                                stderr=subprocess.STDOUT, start_new_session=True)

        def answers() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"jupyterhub exited:\n{self.hub.log.read_text()[-4000:]}")
            try:
                return self.hub.api("GET", "hub/api/")[0] == 200
            except OSError:
                return False

        wait_for("the hub answers", answers, HUB_START, self.hub.log)

    def stop(self) -> None:
        """SIGTERM, as a service manager stops it; killed after a bound. The hub stops its
        proxy, and the people's servers unless ``cleanup_servers`` is off."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def hub_extra() -> str:
    """Config lines a test module adds after the test hub's own (override in the module)."""
    return ""


@pytest.fixture(scope="module")
def hub_process(hub_extra: str) -> Iterator[HubProcess]:
    """A hub with two people, ``a`` and ``b`` in ``hub.people``, their servers running."""
    ensure_built()
    with running_hub(["a", "b"], extra=hub_extra) as running:
        yield running


@contextmanager
def running_hub(suffixes: list[str], extra: str = "", start_servers: bool = True,
                max_hang: float = 60) -> Iterator[HubProcess]:
    """A test hub with one person per suffix (user names share a random stem), each with a
    key file and a hub token; their servers started (and each Home's config written) unless
    ``start_servers`` is false (then :func:`start_person` does it). ``extra`` is appended to
    the config. Everything is stopped and the users removed at the end."""
    if not CHP.exists():
        raise AssertionError(f"{CHP} is missing: run `make hub-deps` (npm install configurable-http-proxy).")
    if os.getuid() != 0:
        raise AssertionError("The hub tests make Unix users: they run as root (`make test` on this machine does).")
    base = shared_folder(Path(tempfile.mkdtemp(prefix="crystal-hub-")))
    hub_dir = base / "hub"
    hub_dir.mkdir(mode=0o700)
    keys = hub_dir / "keys"
    keys.mkdir(mode=0o700)
    stem = "cr" + secrets.token_hex(3)
    people = [Person(f"{stem}{suffix}", secrets.token_hex(8), f"sk-{suffix}-{secrets.token_hex(12)}",
                     Path("/home") / f"{stem}{suffix}") for suffix in suffixes]
    for person in people[1:]:
        person.password = people[0].password  # DummyAuthenticator: one password for all
    server = LLMServer(max_hang=max_hang)
    server.start()
    running: HubProcess | None = None
    made: list[str] = []
    stack = ExitStack()
    try:
        data, config, sets = write_shared(base, server)
        for person in people:
            person.uid = make_user(person.name)
            made.append(person.name)
            key_file = keys / person.name
            key_file.write_text(person.key + "\n")
            key_file.chmod(0o600)
        stack.enter_context(passable_by(closed_folders(Path(sys.executable)), [p.uid for p in people]))
        service_token = secrets.token_hex(24)
        ports = (free_port(), free_port(), free_port())
        (hub_dir / "jupyterhub_config.py").write_text(
            documented_config() + hub_lines(hub_dir, data, config, server, people, ports, service_token) + extra)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "JUPYTER", "OPENAI_"))}
        env.update({"CRYSTAL_KEYS_DIR": str(keys), "CRYSTAL_SHARED_PROMPTSETS": str(sets),
                    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
        hub = Hub(f"http://127.0.0.1:{ports[0]}/", service_token, base, hub_dir / "hub.log", server)
        running = HubProcess(hub, [str(VENV_BIN / "jupyterhub"), "-f", str(hub_dir / "jupyterhub_config.py")], env)
        running.start()
        for person in people:
            hub.people[person.name] = person
            status, body = hub.api("POST", f"hub/api/users/{person.name}/tokens",
                                   body={"note": "crystal hub tests", "expires_in": 3600})
            assert status == 201, (status, body)
            person.token = body["token"]
        if start_servers:
            for person in people:
                start_person(hub, person)
        yield running
    finally:
        if running is not None:
            stop_everything(running, people)
        server.stop()
        for name in made:
            remove_user(name)
        stack.close()
        shutil.rmtree(base, ignore_errors=True)


def start_person(hub: Hub, person: Person) -> None:
    """Start the person's server, then write their Home's config (no kernel has started yet)."""
    start_server(hub, person)
    write_home_config(person)


def write_home_config(person: Person) -> None:
    """The person's Crystal config, in the Home the documented pre_spawn_hook made."""
    config_file = person.crystal_home / "config.json"
    # No inline completions (NB-2): they would ask the scripted model server as a person types.
    config_file.write_text(json.dumps({"topicNaming": False, "approval": "full", "inlineCompletion": "off"}))
    os.chown(config_file, person.uid, person.uid)


def stop_everything(running: HubProcess, people: list[Person]) -> None:
    """Stop each person's server through the hub (their kernels shut down as usual), then
    the hub and its proxy."""
    if running.proc is not None:
        for person in people:
            try:
                running.hub.api("DELETE", f"hub/api/users/{person.name}/server")
            except OSError:
                pass
        for person in people:
            try:
                wait_for(f"{person.name}'s server stopped", lambda p=person: not server_of(running.hub, p),
                         60, running.hub.log)
            except (AssertionError, OSError):
                pass
    running.stop()


def server_of(hub: Hub, person: Person) -> dict[str, Any]:
    """The person's default server as the hub lists it ({} when none)."""
    _, user = hub.api("GET", f"hub/api/users/{person.name}")
    return dict((user or {}).get("servers", {}).get("", {}))


@pytest.fixture(scope="module")
def hub(hub_process: HubProcess) -> Hub:
    return hub_process.hub


@pytest.fixture(scope="module")
def people(hub: Hub) -> tuple[Person, Person]:
    a, b = hub.people.values()
    return a, b


# ---- a person in the browser ----

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def log_in(browser: Any, hub: Hub, person: Person) -> Any:
    """A fresh browser context logged in through the hub's own login form."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{hub.url}hub/login")
    page.fill("#username_input", person.name)
    page.fill("#password_input", person.password)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{person.name}/lab**", timeout=120_000)
    return page


def open_notebook(page: Any, hub: Hub, person: Person, name: str) -> None:
    status, body = hub.api("PUT", f"user/{person.name}/api/contents/{name}", token=person.token, body={
        "type": "notebook", "format": "json", "content": {
            "cells": [], "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "crystal", "display_name": "Crystal", "language": "markdown"}}}})
    assert status in (200, 201), (status, body)
    page.goto(f"{hub.url}user/{person.name}/lab/tree/{name}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=120_000)
    page.wait_for_function(READY, arg="crystal", timeout=120_000)


def run_cell(page: Any, text: str) -> None:
    """Type a new cell at the end at a person's pace, run it, wait until the kernel is idle."""
    page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)
    page.locator(f"{NB} .jp-Cell .cm-content").last.click(timeout=60_000)
    page.keyboard.type(text, delay=DELAY)
    page.keyboard.press("Shift+Enter")
    page.wait_for_timeout(500)
    page.wait_for_function(READY, arg="crystal", timeout=120_000)


def last_request(hub: Hub) -> str:
    """Everything the model received in its last request, as one JSON text."""
    return json.dumps(hub.server.bodies()[-1])


def start_a_long_job(hub: Hub, person: Person, browser: Any, marker: str) -> tuple[Any, dict[str, Any]]:
    """``person`` opens ``culled.ipynb``, has the agent start a background job that runs
    for ten minutes (its answer names ``marker``) and saves the notebook; returns the
    still open page and the job as the sidebar's API lists it (running)."""
    page = log_in(browser, hub, person)
    page.add_locator_handler(page.locator(".jp-Dialog", has_text="Server unavailable"),
                             lambda dialog: dialog.locator("button", has_text="Dismiss").click())
    open_notebook(page, hub, person, "culled.ipynb")
    hub.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": "echo job-up; sleep 600"}}]},
                   {"text": f"Started the long job {marker}."})
    run_cell(page, "Start the long job")
    page.locator(NB).get_by_text(f"Started the long job {marker}.").wait_for(timeout=60_000)
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    _, jobs = hub.api("GET", f"user/{person.name}/crystal/api/jobs", token=person.token)
    [job] = jobs["jobs"]
    assert job["state"] == "running"
    return page, job


def come_back_after_the_stop(hub: Hub, person: Person, browser: Any, job: dict[str, Any], marker: str) -> None:
    """After ``person``'s server was stopped with ``job`` running (BG-2): no process of
    theirs is left, the job is no longer listed as running nor stoppable; the person comes
    back, the saved notebook shows the conversation and the next request holds it."""
    def nothing_of_theirs_runs() -> bool:
        return not [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == person.uid]

    wait_for(f"no process of {person.name} left (the job ended with its kernel)", nothing_of_theirs_runs, 30,
             hub.log)
    start_server(hub, person)
    _, jobs = hub.api("GET", f"user/{person.name}/crystal/api/jobs", token=person.token)
    [after] = [j for j in jobs["jobs"] if (j["session"], j["id"]) == (job["session"], job["id"])]
    # "lost", not "stopped": the hub stops a server with SIGINT, on which jupyter_server
    # (no terminal) exits without shutting its kernels down; ipykernel's parent poller then
    # ends the kernel at once (os._exit), before Crystal can write the job's last status.
    # The job still died with its kernel (no process left above), as BG-2 asks.
    assert after["state"] in ("stopped", "killed", "lost") and not after["stoppable"], after
    page = log_in(browser, hub, person)
    page.goto(f"{hub.url}user/{person.name}/lab/tree/culled.ipynb")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=120_000)
    page.wait_for_function(READY, arg="crystal", timeout=120_000)
    page.locator(NB).get_by_text(f"Started the long job {marker}.").wait_for(timeout=30_000)
    hub.server.add({"text": "Welcome back."})
    run_cell(page, "Where were we?")
    seen = last_request(hub)
    assert "Start the long job" in seen and marker in seen
    page.context.close()
