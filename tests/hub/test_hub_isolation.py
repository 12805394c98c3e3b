"""Two people on one real JupyterHub stay apart (docs/deploy.md, TRUST-4, TRUST-6,
SANDBOX-2): A's Crystal cannot read or list B's sessions, jobs, trust records, Home or
key, through tools, the sidebar's server API, ``/resume`` or a sandboxed command, and
B's key never reaches A's environment, files or the hub's log.

The hub is tests/hub/conftest.py's: real Unix users, each person's server run as that
person (LocalProcessSpawner), the documented ``jupyterhub_config.py``. Each person logs
in with the hub's login form in headless chromium and types into a Crystal notebook;
the model is the loopback server, so every check reads what the model was sent.

B goes first (a turn with a secret in its prompt, a background job whose log holds a
secret, a trusted workspace file); then A attacks. Each test says what it would fail on.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.conftest import NB
from tests.hub.conftest import VENV_BIN, Hub, Person, last_request, log_in, open_notebook, run_cell

pytestmark = [pytest.mark.timeout(900)]

B_PROMPT = "Remember the B-PROMPT-SECRET-7c1e for me"
B_JOB_SECRET = "B-JOB-SECRET-3f9a"


@dataclass
class Acted:
    """What B left behind, as B's own server lists it."""

    session: str     # B's session id
    job: str         # B's running background job
    home_files: list[Path]


@contextmanager
def readable_by_everyone(folder: Path) -> Iterator[None]:
    """``folder`` and all in it readable by every user while the block runs (as Debian's
    0755 homes with a Home others can read would be), modes given back afterwards: what
    then keeps A out is Crystal's own check, not B's file modes."""
    saved = [(path, stat.S_IMODE(path.lstat().st_mode)) for path in [folder, *folder.rglob("*")]
             if not path.is_symlink()]
    try:
        for path, mode in saved:
            path.chmod(mode | (0o055 if path.is_dir() else 0o044))
        yield
    finally:
        for path, mode in saved:
            path.chmod(mode)


def all_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.fixture(scope="module")
def acted(hub: Hub, people: tuple[Person, Person], browser: Any) -> Acted:
    """B's turn (a secret in the prompt, a background job that keeps running with a secret
    in its log) and a workspace file B trusted (TRUST-2: a record in B's Home)."""
    _, b = people
    page = log_in(browser, hub, b)
    open_notebook(page, hub, b, "b.ipynb")
    hub.server.add({"tool_calls": [{"name": "bash_start", "arguments": {
        "command": f"echo {B_JOB_SECRET}; sleep 600"}}]}, {"text": "Started B's job."})
    run_cell(page, B_PROMPT)
    page.locator(NB).get_by_text("Started B's job.").wait_for(timeout=60_000)
    assert f"Bearer {b.key}" == hub.server.requests[-1]["headers"]["authorization"]
    # B trusts a workspace MCP file with the documented command, as B.
    mcp = b.home / ".crystal" / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {}}))
    os.chown(mcp, b.uid, b.uid)
    subprocess.run(["runuser", "-u", b.name, "--", "env", f"HOME={b.home}", f"CRYSTAL_HOME={b.crystal_home}",
                    str(VENV_BIN / "crystal"), "trust", str(mcp), "--workspace", str(b.home)],
                   cwd=b.home, check=True, capture_output=True, timeout=120)
    status, sessions = hub.api("GET", f"user/{b.name}/crystal/api/sessions", token=b.token)
    assert status == 200, sessions
    status, jobs = hub.api("GET", f"user/{b.name}/crystal/api/jobs", token=b.token)
    assert status == 200, jobs
    [session] = [s["id"] for s in sessions["sessions"]]
    [job] = [j for j in jobs["jobs"] if j["state"] == "running"]
    page.context.close()
    return Acted(session, job["id"], all_files(b.crystal_home))


@pytest.fixture(scope="module")
def a_page(hub: Hub, people: tuple[Person, Person], browser: Any, acted: Acted) -> Iterator[Any]:
    a, _ = people
    page = log_in(browser, hub, a)
    open_notebook(page, hub, a, "a.ipynb")
    # A says something first: A's provider is built (and A's key withdrawn from the
    # kernel, TRUST-6) whichever of this module's tests runs first, or alone.
    hub.server.add({"text": "A is here."})
    run_cell(page, "Hello")
    page.locator(NB).get_by_text("A is here.").wait_for(timeout=60_000)
    yield page
    page.context.close()


def b_secrets(b: Person) -> list[str]:
    return [B_PROMPT.split()[2], B_JOB_SECRET, b.key]


def test_each_server_runs_as_its_person_with_its_own_home_and_key(hub, people, acted):
    """Each person's server is a process of that person's uid, with CRYSTAL_HOME in their
    own home and the key from their own file; the key files are the hub's alone. Fails on
    a shared Home (one CRYSTAL_HOME for all), a shared key, or a server run as root."""
    keys = Path(hub.base) / "hub" / "keys"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700 and keys.stat().st_uid == 0
    for person in people:
        assert stat.S_IMODE((keys / person.name).stat().st_mode) == 0o600
        [server] = [p for p in psutil.process_iter(["uids", "cmdline"])
                    if p.info["uids"] and p.info["uids"].real == person.uid
                    and any("jupyterhub-singleuser" in part for part in p.info["cmdline"] or [])]
        env = server.environ()
        assert env["CRYSTAL_HOME"] == str(person.crystal_home)
        assert env["OPENAI_API_KEY"] == person.key
        assert env["CRYSTAL_ARGS"] == "--prompt-set team"
        # The Home the documented pre_spawn_hook made: the person's, private.
        info = person.crystal_home.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (person.uid, 0o700)


def test_shared_prompt_set_is_forced_for_everyone(hub, people, acted, a_page):
    """The team's set, linked into each Home by the hook and forced by CRYSTAL_ARGS
    (FL-1), reaches the model for both people. Fails when the hook or the flag is missing."""
    hub.server.add({"text": "Hello A."})
    run_cell(a_page, "Say hello")
    assert "Follow the team rules of the hub." in last_request(hub)
    b_turn = next(body for body in hub.server.bodies() if B_PROMPT in json.dumps(body))
    assert "Follow the team rules of the hub." in json.dumps(b_turn)
    assert hub.server.requests[-1]["headers"]["authorization"] == f"Bearer {people[0].key}"


def test_a_tools_cannot_read_or_list_b(hub, people, acted, a_page):
    """A's model asks A's Crystal to read B's session, job log, trusted-file record and
    Home files, to list B's folders and to read the hub's key files, with ``read`` and
    with a sandboxed ``bash``. A has first added B's home to the session's folders
    (read-only), so neither Crystal's workspace check nor the sandbox's view stands in
    the way: only B's files being B's own does. Nothing of B's reaches A's model. Fails
    when B's Home or home is readable by A's user (a shared Home, Debian's 0755 homes
    with a Home others can read), or when A can read the hub's key files."""
    a, b = people
    run_cell(a_page, f"/access add {b.home} ro")
    added = a_page.locator(f"{NB} .jp-OutputArea-output").last.inner_text()
    assert f"Added {b.home} (ro)" in added, added
    session_file = b.home / ".crystal" / "sessions" / f"{acted.session}.jsonl"
    assert session_file.exists() and B_PROMPT.split()[2] in session_file.read_text()
    job_logs = [p for p in all_files(b.crystal_home) if p.suffix == ".log"]
    assert any(B_JOB_SECRET in p.read_text(errors="replace") for p in job_logs)
    targets = [session_file, *job_logs, *acted.home_files, Path(hub.base) / "hub" / "keys" / b.name]
    calls = [{"name": "read", "arguments": {"path": str(path)}} for path in targets]
    quoted = " ".join(f"'{p}'" for p in targets)
    calls.append({"name": "bash", "arguments": {"command": (
        f"ls -la {b.home} {b.crystal_home} {b.crystal_home}/sessions; cat {quoted}; "
        f"ls {hub.base}/hub/keys; cat /proc/*/environ | tr '\\0' '\\n' | grep -i key; echo done-looking")}})
    hub.server.add({"tool_calls": calls}, {"text": "Looked at B's files."})
    run_cell(a_page, "Look at the other person's work")
    a_page.locator(NB).get_by_text("Looked at B's files.").wait_for(timeout=60_000)
    seen = last_request(hub)
    assert "done-looking" in seen  # the command ran, in A's sandbox
    for secret in b_secrets(b):
        assert secret not in seen
    # A's own key is withdrawn from tools too (TRUST-4).
    assert a.key not in seen
    assert "Permission denied" in seen


def test_sidebar_api_refuses_another_persons_token(hub, people, acted):
    """A's token against B's server is refused by the hub's single-user auth, for every
    Crystal endpoint; with no token too. B's own token is the control that shows the
    endpoints answer. Fails when B's server accepted any hub user's token."""
    a, b = people
    base = f"user/{b.name}/crystal/api"
    routes = ["sessions", f"sessions/{acted.session}", f"status?session={acted.session}", "jobs",
              f"jobs/{acted.session}/{acted.job}/log", "promptsets"]
    for route in routes:
        status, body = hub.api("GET", f"{base}/{route}", token=b.token)
        assert status == 200, (route, status, body)
        for token in (a.token, ""):
            status, body = hub.api("GET", f"{base}/{route}", token=token)
            assert status in (302, 403), (route, status, body)
            assert B_PROMPT.split()[2] not in json.dumps(body) and B_JOB_SECRET not in json.dumps(body)
    for route in (f"jobs/{acted.session}/{acted.job}/stop", "completion", "promptsets"):
        status, body = hub.api("POST", f"{base}/{route}", token=a.token, body={})
        assert status == 403, (route, status, body)
    status, jobs = hub.api("GET", f"{base}/jobs", token=b.token)
    assert [j["state"] for j in jobs["jobs"] if j["id"] == acted.job] == ["running"]


def test_a_server_lists_only_a_sessions_and_jobs(hub, people, acted, a_page):
    """A's own server, with A's token, lists A's sessions and none of B's; B's session,
    job and log by id are not found there, and a workspace outside A's root is refused,
    all with B's home readable by everyone. Fails when the sidebar's API lists or finds
    anything outside the server's root."""
    a, b = people
    with readable_by_everyone(b.home):
        check_a_server_api(hub, a, b, acted)


def check_a_server_api(hub: Hub, a: Person, b: Person, acted: Acted) -> None:
    base = f"user/{a.name}/crystal/api"
    status, sessions = hub.api("GET", f"{base}/sessions", token=a.token)
    assert status == 200
    ids = [s["id"] for s in sessions["sessions"]]
    assert ids and acted.session not in ids
    status, jobs = hub.api("GET", f"{base}/jobs", token=a.token)
    assert status == 200 and (acted.session, acted.job) not in [(j["session"], j["id"]) for j in jobs["jobs"]]
    assert all(j["session"] != acted.session for j in jobs["jobs"])
    for route in (f"sessions/{acted.session}", f"jobs/{acted.session}/{acted.job}/log"):
        status, body = hub.api("GET", f"{base}/{route}", token=a.token)
        assert status == 404, (route, status, body)
    status, body = hub.api("POST", f"{base}/jobs/{acted.session}/{acted.job}/stop", token=a.token, body={})
    assert status == 404, (status, body)
    for workspace in (f"../{b.name}", str(b.home)):
        status, body = hub.api("GET", f"{base}/sessions?workspace={workspace}", token=a.token)
        assert status == 400 and "error" in body, (workspace, status, body)


def test_resume_of_b_session_is_refused(hub, people, acted, a_page):
    """``/sessions`` in A's notebook lists none of B's, ``/resume B-id`` finds no such
    session, and the next turn carries nothing of B's. Fails when sessions were listed or
    looked up outside A's workspace (a workspace or session index shared with B); B's
    home is readable by everyone meanwhile, so only Crystal's own lookup keeps A out."""
    a, b = people
    with readable_by_everyone(b.home):
        check_resume(hub, a_page, a, b, acted)


def check_resume(hub: Hub, a_page: Any, a: Person, b: Person, acted: Acted) -> None:
    _, sessions = hub.api("GET", f"user/{a.name}/crystal/api/sessions", token=a.token)
    run_cell(a_page, "/sessions")
    listed = a_page.locator(f"{NB} .jp-OutputArea-output").last.inner_text()
    assert sessions["sessions"][0]["id"] in listed and acted.session not in listed, listed
    run_cell(a_page, f"/resume {acted.session}")
    a_page.locator(NB).get_by_text(f"No session '{acted.session}'").wait_for(timeout=30_000)
    hub.server.add({"text": "Still A's own session."})
    run_cell(a_page, "What did we talk about?")
    seen = last_request(hub)
    for secret in b_secrets(b):
        assert secret not in seen


def test_server_api_xsrf_and_cors_as_jupyter(hub, people, acted, a_page):
    """With A's login cookie (no token) a POST without the XSRF token is refused, and a
    request from another origin is refused; with the page's own XSRF token the same POST
    passes the check. Fails when the Crystal endpoints skipped Jupyter's checks."""
    a, _ = people
    url = f"{hub.url}user/{a.name}/crystal/api/promptsets"
    # The cookies the browser sends to A's server (the hub has its own _xsrf cookie too).
    cookies = {c["name"]: c["value"] for c in a_page.context.cookies(url)}
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    body = {"action": "nothing-such"}
    status, reply = hub.api("POST", url[len(hub.url):], token="", body=body, headers={"Cookie": cookie})
    assert status == 403 and "xsrf" in json.dumps(reply).lower(), (status, reply)
    headers = {"Cookie": cookie, "X-XSRFToken": cookies["_xsrf"]}
    status, reply = hub.api("POST", url[len(hub.url):], token="", body=body, headers=headers)
    assert status == 400, (status, reply)  # past the checks: the action itself is bad input
    status, reply = hub.api("POST", url[len(hub.url):], token="", body=body,
                            headers={**headers, "Origin": "http://evil.example"})
    assert status in (403, 404), (status, reply)
    # In the browser: a page of another origin cannot read A's API with A's cookie.
    other = a_page.context.new_page()
    other.goto(hub.server.url.replace("127.0.0.1", "localhost") + "/")
    outcome = other.evaluate("""async (url) => {
        try { const r = await fetch(url, {credentials: 'include'}); return 'read ' + r.status + ' ' + await r.text(); }
        catch (e) { return 'blocked'; } }""", url.replace("promptsets", "sessions"))
    assert outcome == "blocked", outcome
    other.close()


def test_b_key_never_reaches_a(hub, people, acted, a_page):
    """B's key is in no process of A's (environ), no file in A's home and not in the hub's
    log (where the servers' output goes); A's own key is withdrawn from A's kernel once
    its provider is built (TRUST-6). Fails when keys were shared or passed between people."""
    a, b = people
    processes = [p for p in psutil.process_iter(["uids", "cmdline", "environ"])
                 if p.info["uids"] and p.info["uids"].real == a.uid]
    # A process that ended meanwhile (a zombie, say) has no command line or environment left.
    kernels = [p for p in processes if "crystal_kernel.jupyter" in " ".join(p.info["cmdline"] or [])]
    assert processes and kernels
    for proc in processes:
        environ = "\n".join(f"{k}={v}" for k, v in (proc.info["environ"] or {}).items())
        assert b.key not in environ, proc.info["cmdline"]
    for kernel in kernels:
        assert a.key not in "\n".join((kernel.info["environ"] or {}).values())
    for path in all_files(a.home):
        assert b.key.encode() not in path.read_bytes(), path
    hub_log = hub.log.read_text(errors="replace")
    assert b.key not in hub_log and a.key not in hub_log
