"""JupyterHub's own idle culler (``jupyterhub-idle-culler``) stops a person's server while a
background job runs, and nothing is lost (docs/deploy.md).

The culler runs as the hub service the documented ``jupyterhub_config.py`` declares, with
its timeout cut from an hour to a few seconds for the test, and each person's server
reports its activity to the hub every second (``JUPYTERHUB_ACTIVITY_INTERVAL``; the
default is every five minutes). A running background job is not activity: once the
person has left, the culler stops the server, the job ends with the kernel (BG-2), and
when the person comes back the notebook holds the conversation and its session goes on.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.hub.conftest import (
    Hub,
    HubProcess,
    Person,
    come_back_after_the_stop,
    server_of,
    start_a_long_job,
    wait_for,
)

pytestmark = [pytest.mark.timeout(600)]

#: The culler's idle timeout for this test (the documented config says 3600), in seconds.
IDLE = 12


@pytest.fixture(scope="module")
def hub_extra() -> str:
    """The documented culler service with a short timeout, and activity reported each second."""
    return f"""
# ---- tests/hub/test_hub_culler.py: the culler's timeout in seconds ----
for _service in c.JupyterHub.services:
    if _service["name"] == "idle-culler":
        _service["command"] = [_a for _a in _service["command"] if not _a.startswith("--timeout")] + [
            "--timeout={IDLE}", "--cull-every=2"]
c.Spawner.environment["JUPYTERHUB_ACTIVITY_INTERVAL"] = "1"
"""


def cullings(hub: Hub, person: Person) -> int:
    """How often the culler logged stopping the person's server (the hub runs it: its log is the hub's)."""
    return hub.log.read_text().count(f"Culling server {person.name} ")


def test_idle_culler_stops_a_server_with_a_job_running_and_the_session_resumes(
        hub_process: HubProcess, people: tuple[Person, Person], browser: Any) -> None:
    """BG-2 under the hub's idle culler: B starts a background job (``sleep 600``) in a
    Crystal notebook, saves and leaves. The culler (not the test) stops B's server after
    its idle timeout: no process of B is left, the job is no longer listed as running and
    cannot be stopped; when B comes back, the saved notebook shows the conversation and
    the next request to the model holds the earlier turn. Fails when a job counts as
    activity (the server is never culled), when the job outlives its kernel, or when the
    notebook starts a new session."""
    hub = hub_process.hub
    _, b = people
    page, job = start_a_long_job(hub, b, browser, "CULL-JOB-9")
    # B leaves: the page closes, the job goes on in B's kernel.
    page.context.close()
    left, before = time.monotonic(), cullings(hub, b)
    wait_for(f"the idle culler stopped {b.name}'s server",
             lambda: cullings(hub, b) > before and not server_of(hub, b), IDLE + 90, hub.log)
    assert time.monotonic() - left >= IDLE - 2  # idle for the timeout first, not stopped at once
    come_back_after_the_stop(hub, b, browser, job, "CULL-JOB-9")
