"""Kernels that run elsewhere: a real gateway hosts the Crystal kernel, and a real
``jupyter lab --gateway-url`` reaches it, in headless chromium. Every test runs twice,
once per gateway: ``jupyter kernelgateway`` (jupyter_kernel_gateway, in the venv) and
``jupyter enterprisegateway`` (jupyter_enterprise_gateway 3.3 with its local process
proxy, in build/eg: it needs jupyter_client 6 and jupyter_server 1, which the venv's
Jupyter cannot share; ``make eg-deps`` makes it and ``make test`` does too). Enterprise
Gateway runs with the ``jupyter_enterprise_gateway_config.py`` of docs/deploy.md as
written. The kernel's Home and workspace are folders the lab server cannot
see (outside its root, and the server has a Home of its own), as on a remote host.

A person, typing with a per-key delay and clicking, approves a tool call in the
approval form, answers a question form, interrupts a running cell, starts a background
job and follows its log with ``/logs --follow``, and restarts the kernel (the notebook's
session goes on, with the person's key); each step checks what the model received in its
next request. The person's key, sent by their server with each kernel start, is in no
log of the gateway or the server, nor in any file the kernel wrote. Then the sidebar shows the kernel's sessions, jobs (with
their live log and Stop) and prompt sets, read over the kernel's ``crystal.sidebar``
comm, never the server's disk (jupyter/sidebar_comm.py).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.llm_server import LLMServer
from tests.e2e.conftest import (
    DELAY,
    KEY_ENV,
    NB,
    READY,
    ROOT,
    ensure_built,
    free_port,
    run_saved_then_reload,
    running_lab,
    served,
    server_env,
)

pytestmark = pytest.mark.timeout(600)

# What the kernel gets from the gateway's own environment: a gateway passes a kernel
# only PATH and the variables it is told to (KernelGatewayApp.env_process_whitelist).
KERNEL_VARS = ("HOME", "CRYSTAL_HOME", "CRYSTAL_PROVIDER", "CRYSTAL_MODEL", "CRYSTAL_BASE_URL",
               "CRYSTAL_API_KEY_ENV")
# The key comes from the person's own server (JupyterHub's spawner sets it there): the
# lab sends it with the start request (GatewayClient.allowed_envs) and the gateway lets
# it through (JupyterWebsocketPersonality.env_whitelist). The gateway itself has none.
USER_KEY = "key-from-the-users-server"
# Enterprise Gateway passes every KERNEL_ variable a start request carries, and a
# person's server sends every KERNEL_ variable of its environment: the key under such a
# name needs no setting on either side (docs/deploy.md).
EG_KEY_ENV = "KERNEL_CRYSTAL_API_KEY"
ENTERPRISE_GATEWAY = ROOT / "build" / "eg" / "bin" / "jupyter-enterprisegateway"
DEPLOY = ROOT / "docs" / "deploy.md"


@dataclass
class Gateway:
    url: str
    token: str
    home: Path       # the kernel's CRYSTAL_HOME
    workspace: Path  # the kernel's working folder (the gateway's root)
    log: Path
    server: LLMServer
    # How the person's server reaches it: its command-line arguments and environment.
    lab_args: tuple[str, ...]
    lab_env: dict[str, str]


def documented_eg_config() -> str:
    """The ``jupyter_enterprise_gateway_config.py`` block of docs/deploy.md, as written."""
    found = re.search(r"`jupyter_enterprise_gateway_config.py`:\n\n```python\n(.*?)```", DEPLOY.read_text(), re.S)
    assert found, "docs/deploy.md has no jupyter_enterprise_gateway_config.py block"
    return found.group(1)


def write_promptset(home: Path, name: str, title: str) -> Path:
    folder = home / "promptsets" / name
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps({"name": title, "keep": "me"}))
    (folder / "work.md").write_text(f"{title}.\n")
    return folder


def kernel_gateway_argv(port: int, token: str) -> list[str]:
    return [str(Path(sys.executable).parent / "jupyter"), "kernelgateway", "--ip=127.0.0.1", f"--port={port}",
            "--port_retries=0", f"--KernelGatewayApp.auth_token={token}",
            "--JupyterWebsocketPersonality.list_kernels=True",
            f"--JupyterWebsocketPersonality.env_whitelist={KEY_ENV}",
            *[f"--KernelGatewayApp.env_process_whitelist={name}" for name in KERNEL_VARS]]


@pytest.fixture(scope="module", params=["kernelgateway", "enterprisegateway"])
def gateway(request, tmp_path_factory) -> Iterator[Gateway]:
    base = tmp_path_factory.mktemp(request.param)
    home, workspace, data = base / "kernel-home", base / "kernel-workspace", base / "jupyter"
    (home / ".crystal").mkdir(parents=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False, "approval": "full"}))
    write_promptset(home / ".crystal", "kernel-side", "Kernel side prompts")
    workspace.mkdir()
    (data / "kernels" / "crystal").mkdir(parents=True)
    (data / "kernels" / "crystal" / "kernel.json").write_text(json.dumps(kernel_json(python=sys.executable)))
    server = LLMServer(max_hang=90)
    server.start()
    token, port = secrets.token_hex(16), free_port()
    env = server_env(base, home, data, server)
    env.pop(KEY_ENV)  # the gateway has no key: the person's server sends it
    if request.param == "kernelgateway":
        argv = kernel_gateway_argv(port, token)
        # The lab sends the key with the start request (GatewayClient.allowed_envs).
        lab_args: tuple[str, ...] = (f"--GatewayClient.allowed_envs={KEY_ENV}",)
        lab_env = {KEY_ENV: USER_KEY}
    else:
        if not ENTERPRISE_GATEWAY.exists():
            pytest.fail(f"{ENTERPRISE_GATEWAY} is missing: run `make eg-deps` (make test makes it)")
        (base / "config").mkdir()
        (base / "config" / "jupyter_enterprise_gateway_config.py").write_text(documented_eg_config())
        env.pop("PYTHONPATH")  # the venv's import shims (tests/e2e/lazy) are not for build/eg's Python
        # The gateway's own environment, as docs/deploy.md starts it: the name of the
        # key's variable, and the words that mark a variable as secret in its log.
        env.update(CRYSTAL_API_KEY_ENV=EG_KEY_ENV, EG_SENSITIVE_ENV_KEYS="api_key")
        argv = [str(ENTERPRISE_GATEWAY), "--ip=127.0.0.1", f"--port={port}", "--port_retries=0",
                f"--EnterpriseGatewayApp.auth_token={token}"]
        lab_args = ()
        # The person's server names the person (Enterprise Gateway refuses kernels for
        # root, which the tests run as) and gives a kernel start on a loaded machine time.
        lab_env = {EG_KEY_ENV: USER_KEY, "KERNEL_USERNAME": "ada", "KERNEL_LAUNCH_TIMEOUT": "90"}
    url, log = f"http://127.0.0.1:{port}", base / "gateway.log"
    try:
        with served(argv, cwd=workspace, env=env, log=log, ready=f"{url}/api/kernelspecs",
                    headers={"Authorization": f"token {token}"}, what=f"jupyter {request.param}"):
            yield Gateway(url, token, home / ".crystal", workspace, log, server, lab_args, lab_env)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab(gateway, tmp_path_factory):
    """The lab of the shared ``page`` fixture, here a lab whose kernels run in the gateway."""
    ensure_built()
    base = tmp_path_factory.mktemp("gwlab")
    with running_lab(base, server=gateway.server, env_extra=gateway.lab_env, extra_args=(
            f"--gateway-url={gateway.url}", f"--GatewayClient.auth_token={gateway.token}",
            *gateway.lab_args, "--GatewayClient.request_timeout=60")) as started:
        # The server's own Home has a prompt set the kernel's Home does not.
        write_promptset(started.home, "server-only", "Server side prompts")
        yield started


def make_notebook(lab, name: str) -> None:
    lab.api("PUT", f"api/contents/{name}", {"type": "notebook", "format": "json", "content": {
        "cells": [], "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "crystal", "display_name": "Crystal", "language": "markdown"}}}})


def run_cell(page, text: str) -> None:
    """Type a new cell at the end at a person's pace and run it (Shift+Enter)."""
    page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)
    editor = page.locator(f"{NB} .jp-Cell .cm-content").last
    editor.click(timeout=60_000)
    page.keyboard.type(text, delay=DELAY)
    page.keyboard.press("Shift+Enter")


def tool_results(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def wait_idle(page) -> None:
    page.wait_for_function(READY, arg="crystal", timeout=90_000)


@pytest.fixture(scope="module")
def page(browser, lab, gateway):
    """One Crystal notebook whose kernel the gateway started, shared by the tests in order."""
    make_notebook(lab, "remote.ipynb")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}lab/tree/remote.ipynb?reset&token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    try:
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
    except PlaywrightTimeoutError:
        # jupyter_server's gateway client can lose the race of the page's first two kernel
        # websockets (the lab log says "Websocket connection has been closed via client
        # disconnect" and the gateway's ping times out after 90 s): the page then gets no
        # kernel message at all. A person reloads; so does this setup, once. The kernel is
        # the same one (the first test asserts the gateway hosts exactly one).
        page.reload()
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
        wait_idle(page)
    yield page
    context.close()


def test_gateway_hosts_the_kernel_not_the_lab_server(page, lab, gateway):
    """The kernel the notebook talks to is one the gateway started (the lab server
    runs no kernel of its own), working in the gateway's folder."""
    kernels = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{gateway.url}/api/kernels", headers={"Authorization": f"token {gateway.token}"}), timeout=10).read())
    page_kernel = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
    assert [k["id"] for k in kernels] == [page_kernel]
    assert [k["name"] for k in kernels] == ["crystal"]


def test_approval_form_through_the_gateway(page, gateway):
    """Widgets' comms go through the gateway's websocket: the approval form appears and
    a click on Allow once runs the command (in the kernel's workspace)."""
    run_cell(page, "/approval default")
    wait_idle(page)
    gateway.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo approved-remotely > proof.txt && pwd"}}]},
                       {"text": "Wrote the proof file."})
    run_cell(page, "Write the proof file")
    allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once")
    allow.wait_for(timeout=60_000)
    allow.click()
    page.locator(NB).get_by_text("Wrote the proof file.").wait_for(timeout=60_000)
    result = tool_results(gateway.server.bodies("chat")[-1])[-1]
    assert str(gateway.workspace) in result, result
    assert (gateway.workspace / "proof.txt").read_text().strip() == "approved-remotely"
    # The key the person's server sent along reached the kernel (the gateway has none).
    assert gateway.server.requests[-1]["headers"]["authorization"] == f"Bearer {USER_KEY}"
    wait_idle(page)


def test_question_form_typed_into_through_the_gateway(page, gateway):
    """Q-3, Q-4, FORM-1: typed text arrives whole through the gateway."""
    gateway.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [
        {"header": "Service", "question": "Which service should I split out?",
         "options": [{"label": "billing-api", "description": "payments"},
                     {"label": "auth-api", "description": "logins"}]},
        {"header": "Checks", "question": "Which checks should run?", "multiple": True,
         "options": [{"label": "lint", "description": "ruff"}, {"label": "tests", "description": "pytest"}]},
    ]}}]}, {"text": "Split out inventory-api."})
    run_cell(page, "Plan the split")
    field = page.locator(f"{NB} .jp-Cell .widget-text input[placeholder*='your own']").first
    field.wait_for(timeout=60_000)
    field.click()
    page.keyboard.type("inventory-api", delay=DELAY)
    page.locator(f"{NB} .widget-checkbox", has_text="lint").locator("input").click()
    page.locator(f"{NB} .jupyter-button", has_text="Next").click()
    confirm = page.locator(f"{NB} .jp-Cell .widget-html", has_text="Submit these answers?")
    confirm.wait_for()
    assert "inventory-api" in confirm.inner_text()
    page.locator(f"{NB} .jupyter-button", has_text="Submit").click()
    page.locator(NB).get_by_text("Split out inventory-api.").wait_for(timeout=60_000)
    assert json.loads(tool_results(gateway.server.bodies("chat")[-1])[-1]) == [["inventory-api"], ["lint"]]
    wait_idle(page)


def test_interrupt_through_the_gateway(page, gateway):
    """The stop button reaches the kernel through the gateway (interrupt_mode message):
    a hanging answer stops at once and the next request carries the partial answer."""
    gateway.server.add({"text": "The first words arrive and then", "chunk": 6, "hang": 80, "hang_after": 3})
    run_cell(page, "Write an essay")
    page.locator(NB).get_by_text("The first").wait_for(timeout=60_000)
    started = time.monotonic()
    page.locator(".jp-Toolbar-item [data-command='notebook:interrupt-kernel']").first.click()
    page.locator(NB).get_by_text("Interrupted.").wait_for(timeout=30_000)
    wait_idle(page)
    assert time.monotonic() - started < 30, "the interrupt ended the turn, not the 80 s hang"
    gateway.server.add({"text": "Continuing after the stop."})
    run_cell(page, "Go on")
    page.locator(NB).get_by_text("Continuing after the stop.").wait_for(timeout=60_000)
    assistant = [m for m in gateway.server.bodies("chat")[-1]["messages"] if m["role"] == "assistant"]
    assert assistant[-1]["content"].startswith("The first"), assistant[-1]
    wait_idle(page)


def test_background_job_and_logs_follow_through_the_gateway(page, gateway):
    """BG-1: a job started by the model; ``/logs j1 --follow`` keeps the cell's view
    current through the gateway until the job ends."""
    run_cell(page, "/approval full")
    wait_idle(page)
    gateway.server.add({"tool_calls": [{"name": "bash_start", "arguments": {
        "command": "for i in $(seq 1 12); do echo tick $i; sleep 0.25; done"}}]}, {"text": "Started the ticker."})
    run_cell(page, "Start the ticker")
    page.locator(NB).get_by_text("Started the ticker.").wait_for(timeout=60_000)
    result = tool_results(gateway.server.bodies("chat")[-1])[-1]
    assert "j1" in result, result
    wait_idle(page)
    run_cell(page, "/logs j1 --follow")
    page.locator(NB).get_by_text("tick 12").wait_for(timeout=60_000)
    wait_idle(page)


def scroll_to_the_last_cell(page) -> None:
    """As a person would: cells far off screen are not drawn."""
    page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content;
        return nb.scrollToItem(nb.widgets.length - 1, 'center'); }""")


def status_asks_refused(lab) -> int:
    """The status bar's asks for a saved status that the lab server refused (it holds no
    sessions: they are the gateway's)."""
    return sum(1 for line in lab.log.read_text(errors="replace").splitlines()
               if "/crystal/api/status" in line and " 404 " in line)


def test_reload_while_an_approval_waits_through_the_gateway(page, lab, gateway):
    """FORM-2 through the gateway: a page reloaded while a form waits gets it back (the
    crystal.live comm and the widget's comms reconnect through the gateway's websocket),
    and the click completes the cell. Meanwhile the status bar, whose kernel answers
    only when the turn ends, does not ask the lab server for a saved status it cannot
    have (it asked at every status change, each a 404)."""
    refused = status_asks_refused(lab)
    run_cell(page, "/approval default")
    wait_idle(page)
    gateway.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo after-the-reload"}}]},
                       {"text": "Ran it after the reload."})
    run_saved_then_reload(page, "Run it after a reload", "Allow once")
    cell = page.locator(f"{NB} .jp-Cell", has_text="Run it after a reload").first
    allow = cell.locator(".jupyter-button", has_text="Allow once")
    try:
        scroll_to_the_last_cell(page)
        allow.wait_for(timeout=45_000)
    except PlaywrightTimeoutError:
        # The page fixture's race again, after the reload: the lab log says the reloaded
        # page's first kernel websocket "has been closed via client disconnect", and the
        # form stays "Loading widget..." (seen once, through Kernel Gateway, on a machine at
        # load 7). A person reloads again; so does this test, once.
        page.reload()
        page.wait_for_function(READY.replace("k.status === 'idle'", "true"), arg="crystal", timeout=90_000)
        scroll_to_the_last_cell(page)
        allow.wait_for(timeout=60_000)
    allow.click()
    cell.get_by_text("Ran it after the reload.").wait_for(timeout=60_000)
    assert "after-the-reload" in tool_results(gateway.server.bodies("chat")[-1])[-1]
    wait_idle(page)
    # The reloaded notebook ends with that cell: add an empty one below it (Esc, B).
    page.locator(f"{NB} .jp-Cell .cm-content").last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    run_cell(page, "/approval full")
    wait_idle(page)
    assert status_asks_refused(lab) == refused


def open_sidebar(page) -> None:
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.wait_for_selector("#crystal-sidebar .jp-crystal-section-jobs")


def test_sidebar_reads_the_remote_kernel_not_the_server_disk(page, lab, gateway):
    """The sidebar of a gateway server gets sessions, jobs and prompt sets from the
    notebook's kernel over its comm: the kernel's Home and workspace are invisible to
    the server, whose own Home has a prompt set the kernel does not."""
    assert not (lab.root / ".crystal").exists(), "the lab server's root holds no Crystal data"
    assert (gateway.workspace / ".crystal" / "sessions").is_dir()
    # A long job to stop from the sidebar, started through the model.
    gateway.server.add({"tool_calls": [{"name": "bash_start", "arguments": {
        "command": "for i in $(seq 1 600); do echo beat $i; sleep 0.1; done"}}]}, {"text": "Started the beat."})
    run_cell(page, "Start the beat")
    page.locator(NB).get_by_text("Started the beat.").wait_for(timeout=60_000)
    wait_idle(page)

    open_sidebar(page)
    sidebar = page.locator("#crystal-sidebar")
    sidebar.locator(".jp-crystal-source", has_text="remote.ipynb").wait_for(timeout=30_000)
    sidebar.locator(".jp-crystal-refresh").click()
    # Sessions: the kernel's one session, with its transcript.
    session = sidebar.locator(".jp-crystal-session").first
    session.wait_for(timeout=30_000)
    assert sidebar.locator(".jp-crystal-session").count() == 1
    session.click()
    view = page.locator(".jp-crystal-transcript")
    view.get_by_text("Write the proof file").first.wait_for(timeout=30_000)
    assert "bash_start" in view.inner_text()
    open_sidebar(page)
    # Jobs: j1 ended, j2 running with a live log, stopped from the sidebar.
    done = sidebar.locator('.jp-crystal-job[data-id="j1"]')
    done.wait_for(timeout=30_000)
    assert done.get_attribute("data-state") == "exited"
    job = sidebar.locator('.jp-crystal-job[data-id="j2"]')
    assert job.get_attribute("data-state") == "running"
    job.locator(".jp-crystal-log-toggle").click()
    page.wait_for_function(
        "() => /beat \\d+/.test(document.querySelector('.jp-crystal-job[data-id=\"j2\"] .jp-crystal-log')?.textContent || '')",
        timeout=30_000)
    job.locator(".jp-crystal-stop").click()
    page.wait_for_function(
        "() => { const j = document.querySelector('.jp-crystal-job[data-id=\"j2\"]'); return j && j.dataset.state !== 'running'; }",
        timeout=30_000)
    status = json.loads(next((gateway.workspace / ".crystal" / "data" / "jobs").iterdir()).joinpath("j2.json").read_text())
    assert status["state"] != "running"
    # Prompts: the kernel's Home, not the server's.
    row = sidebar.locator('.jp-crystal-promptset[data-name="kernel-side"]')
    row.wait_for(timeout=30_000)
    assert sidebar.locator('.jp-crystal-promptset[data-name="server-only"]').count() == 0
    row.locator(".jp-crystal-enable").click()
    page.wait_for_selector('.jp-crystal-promptset.jp-mod-selected[data-name="kernel-side"]', timeout=30_000)
    # The notebook's status bar asks the kernel again and shows the kernel's set.
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-promptset')?.textContent === 'kernel-side'",
                           timeout=30_000)
    manifest = gateway.home / "promptsets" / "kernel-side" / "prompt.json"
    assert json.loads(manifest.read_text()) == {"name": "Kernel side prompts", "keep": "me", "enabled": True}
    assert "enabled" not in json.loads((lab.home / "promptsets" / "server-only" / "prompt.json").read_text())
    # The kernel uses it: the model's next request starts with the set's Work text.
    page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="remote.ipynb").click()
    gateway.server.add({"text": "Using the kernel side set."})
    run_cell(page, "Which prompts?")
    page.locator(NB).get_by_text("Using the kernel side set.").wait_for(timeout=60_000)
    system = gateway.server.bodies("chat")[-1]["messages"][0]["content"]
    assert "Kernel side prompts." in system, system[:300]


def gateway_kernels(gateway) -> list[dict]:
    return json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{gateway.url}/api/kernels", headers={"Authorization": f"token {gateway.token}"}), timeout=10).read())


def test_restart_through_the_gateway_keeps_the_session_and_the_key(page, gateway):
    """A restart from the Kernel menu goes through the gateway: the gateway still hosts
    one kernel, the notebook's next cell continues its session (the model gets the
    earlier turns), and the restarted kernel has the key the person's server sent."""
    before = gateway_kernels(gateway)
    page.locator(f"{NB} .jp-Cell .cm-content").last.click()
    page.evaluate("() => { void window.jupyterapp.commands.execute('notebook:restart-kernel'); }")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_timeout(1500)
    wait_idle(page)
    after = gateway_kernels(gateway)
    assert [k["id"] for k in after] == [k["id"] for k in before], (before, after)
    gateway.server.add({"text": "You wrote the proof file."})
    run_cell(page, "What did I ask first?")
    note = page.locator(NB).get_by_text("Continuing this notebook's session")
    note.wait_for(timeout=60_000)
    page.locator(NB).get_by_text("You wrote the proof file.").wait_for(timeout=60_000)
    users = [m["content"] for m in gateway.server.bodies("chat")[-1]["messages"] if m["role"] == "user"]
    assert any("Write the proof file" in str(text) for text in users), users
    assert gateway.server.requests[-1]["headers"]["authorization"] == f"Bearer {USER_KEY}"
    wait_idle(page)


def test_the_key_is_in_no_log_and_no_file(page, lab, gateway):
    """The key the person's server sent with the kernel's start (the gateway kept it for
    the restart) is in neither the gateway's log (the kernel's own output included) nor the
    person's server's log, nor in any file the kernel wrote in its Home or workspace; and a
    tool's environment has it under no name (TRUST-4: a KERNEL_ name is still the key's)."""
    gateway.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "env | sort"}}]},
                       {"text": "Listed the environment."})
    run_cell(page, "List the environment")
    page.locator(NB).get_by_text("Listed the environment.").wait_for(timeout=60_000)
    listed = tool_results(gateway.server.bodies("chat")[-1])[-1]
    assert "PATH=" in listed and USER_KEY not in listed, listed
    wait_idle(page)
    assert gateway.server.requests[-1]["headers"]["authorization"] == f"Bearer {USER_KEY}"  # it was used
    for log in (gateway.log, lab.log):
        text = log.read_text(errors="replace")
        assert text, f"{log} is empty"
        assert USER_KEY not in text, f"{log} holds the key"
    for folder in (gateway.home, gateway.workspace):
        for path in folder.rglob("*"):
            if path.is_file():
                assert USER_KEY.encode() not in path.read_bytes(), f"{path} holds the key"
