"""Nothing lost when the hub and its proxy restart mid-turn (docs/deploy.md).

The documented config sets ``cleanup_servers`` off, as a hub that is upgraded or
restarted in production needs: the people's servers (and so their Crystal kernels) keep running while
the hub and the proxy it started are stopped and started again. A person is in the middle
of a turn (the model's reply held halfway) when that happens; the answer still arrives in
their notebook once the page reconnects through the new proxy, and the next turn carries
the whole conversation.
"""

from __future__ import annotations

import json
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import DELAY, NB, READY
from tests.hub.conftest import (
    HubProcess,
    Person,
    come_back_after_the_stop,
    last_request,
    log_in,
    open_notebook,
    run_cell,
    server_of,
    start_a_long_job,
    wait_for,
)

pytestmark = [pytest.mark.timeout(600)]

ANSWER = "The answer that was streaming while the hub restarted ends here: RESTART-SAFE-42."


def server_pid(person: Person) -> int:
    found = [p for p in psutil.process_iter(["uids", "cmdline"])
             if p.info["uids"] and p.info["uids"].real == person.uid
             and any("jupyterhub-singleuser" in part for part in p.info["cmdline"] or [])]
    assert len(found) == 1, f"{person.name} has {len(found)} servers running, not 1"
    return int(found[0].pid)


def proxy_pids(hub_process: HubProcess) -> set[int]:
    api_port = hub_process.hub.log.parent.joinpath("jupyterhub_config.py").read_text().split(
        'c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:')[1].split('"')[0]
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if any("configurable-http-proxy" in part for part in p.info["cmdline"] or [])
            and any(api_port in part for part in p.info["cmdline"] or [])}


def test_hub_and_proxy_restart_mid_turn_lose_nothing(hub_process: HubProcess, people, browser: Any):
    """A turn streams while the hub and proxy restart: the person's server and kernel stay
    the same processes, the answer completes in the notebook, and the next request to the
    model holds the first prompt and answer. Fails when a restart stops the people's
    servers (``cleanup_servers`` on: their turns would be lost) or when the page cannot get its answer back."""
    hub = hub_process.hub
    a, _ = people
    page = log_in(browser, hub, a)
    open_notebook(page, hub, a, "restart.ipynb")
    # JupyterLab's own dialog when its requests failed while the proxy was down ("Server
    # unavailable or unreachable ... restart it?"): the server never stopped, so the
    # person dismisses it.
    page.add_locator_handler(page.locator(".jp-Dialog", has_text="Server unavailable"),
                             lambda dialog: dialog.locator("button", has_text="Dismiss").click())
    before_server, before_proxy = server_pid(a), proxy_pids(hub_process)
    assert before_proxy
    # The reply stops after its first pieces until released (LLMServer's hold_after).
    hub.server.add({"text": ANSWER, "chunk": 8, "hold_after": 3})
    page.locator(f"{NB} .jp-Cell .cm-content").last.click()
    page.keyboard.type("Tell me the long answer", delay=DELAY)
    page.keyboard.press("Shift+Enter")
    assert hub.server.wait_held(90), "the turn never reached the model"
    hub_process.restart()
    assert proxy_pids(hub_process).isdisjoint(before_proxy)  # a new proxy
    assert server_pid(a) == before_server and server_of(hub, a).get("ready")
    hub.server.release()
    page.locator(NB).get_by_text("RESTART-SAFE-42").wait_for(timeout=120_000)
    page.wait_for_function(READY, arg="crystal", timeout=120_000)
    hub.server.add({"text": "Second answer after the restart."})
    run_cell(page, "And now?")
    seen = last_request(hub)
    assert "Tell me the long answer" in seen and "RESTART-SAFE-42" in seen
    status, sessions = hub.api("GET", f"user/{a.name}/crystal/api/sessions", token=a.token)
    assert status == 200 and [s["turns"] for s in sessions["sessions"]] == [2], json.dumps(sessions)[:500]
    page.context.close()


def test_server_stopped_with_a_job_running_then_resumed(hub_process: HubProcess, people, browser: Any):
    """The hub stops a person's server (as the idle culler does: ``DELETE
    /hub/api/users/NAME/server``) while a background job runs. The job ends with the
    kernel and leaves no process behind (BG-2), and the sidebar no longer says it runs;
    when the person comes back, the saved notebook still shows the conversation and its
    session goes on (the next request holds the earlier turn). Fails on an orphaned job,
    a job still listed as running, or a notebook that starts a new session."""
    hub = hub_process.hub
    _, b = people
    page, job = start_a_long_job(hub, b, browser, "CULL-JOB-7")
    status, body = hub.api("DELETE", f"hub/api/users/{b.name}/server")
    assert status in (202, 204), (status, body)
    wait_for(f"{b.name}'s server stopped", lambda: not server_of(hub, b), 90, hub.log)
    page.context.close()
    come_back_after_the_stop(hub, b, browser, job, "CULL-JOB-7")
