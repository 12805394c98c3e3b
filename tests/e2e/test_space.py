"""``crystal space`` (SPEC §13 Fronts): the real command in a real terminal
(tmux), JupyterLab in Chromium on the URL it printed, a Crystal notebook opened for the
session, the process flags reaching the kernel, Ctrl-C leaving no process behind.

The model is the loopback server; the kernels reach it through the space's environment
(CRYSTAL_BASE_URL), as a person's kernels reach their model through theirs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal
from tests.e2e.conftest import (
    ARTIFACTS,
    BUILT,
    JUPYTER_AI_LAB_EXTENSIONS,
    JUPYTER_AI_SERVER_EXTENSIONS,
    NB,
    READY,
    blank_page,
    ensure_built,
    free_port,
    server_env,
    type_and_run,
    write_home,
)

CRYSTAL = str(Path(sys.executable).parent / "crystal")
URL = re.compile(r"http://\S+/lab/tree/(\S+)\?token=[0-9a-f]+")
SHOTS = Path(os.environ.get("CRYSTAL_SHOTS", ARTIFACTS))


@contextmanager
def space_in_terminal(base: Path, server: LLMServer, *args: str) -> Iterator[tuple[TmuxTerminal, str, Path]]:
    """``crystal space --workspace WS ARGS`` typed into a terminal; yields the terminal,
    the URL it printed and the workspace. The pane says ``EXIT=<status>`` when it ends."""
    ensure_built()
    workspace, home, data = base / "ws", base / "home", base / "jupyter"
    workspace.mkdir(exist_ok=True)
    if not (home / ".crystal").exists():
        write_home(home / ".crystal")
    (data / "labextensions").mkdir(parents=True, exist_ok=True)
    if not (data / "labextensions" / "crystal-kernel").exists():
        os.symlink(BUILT, data / "labextensions" / "crystal-kernel")  # the lab extension of this checkout
    (base / "config" / "labconfig").mkdir(parents=True, exist_ok=True)
    # Jupyter AI (a test dependency, installed beside Crystal here) off, as in the other
    # labs of these tests (conftest.running_lab): its server extensions and chat panels are
    # not what these tests look at, and cost seconds of CPU at every start.
    disabled = {"@jupyterlab/apputils-extension:announcements": True, **dict.fromkeys(JUPYTER_AI_LAB_EXTENSIONS, True)}
    (base / "config" / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": dict.fromkeys(JUPYTER_AI_SERVER_EXTENSIONS, False)}}))
    env = server_env(base, home, data, server)
    line = shlex.join([CRYSTAL, "space", "--workspace", str(workspace), "--no-browser", "--port", str(free_port()),
                       *args, "--", "--allow-root", "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
                       "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"])
    term = TmuxTerminal(f"cd {shlex.quote(str(workspace))} && {line}; echo EXIT=$?; sleep 300", env, width=250)
    try:
        screen = term.wait_for("Ctrl-C stops the space", timeout=120)
        match = URL.search(screen.split("Crystal space on", 1)[1])
        assert match, screen
        yield term, match.group(0), workspace
    finally:
        term.close()


def the_space(workspace: Path) -> psutil.Process:
    """The ``crystal space`` process of ``workspace``."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "space" in cmdline and str(workspace) in cmdline and any(a.endswith("crystal") for a in cmdline[:2]):
            return proc
    raise AssertionError("no crystal space process")


def stop_with_ctrl_c(term: TmuxTerminal, workspace: Path) -> None:
    """Ctrl-C in the terminal: the space exits 0 and every process it started is gone."""
    space = the_space(workspace)
    started = space.children(recursive=True)
    assert any("crystal_kernel.jupyter" in " ".join(p.cmdline()) for p in started), started
    term.key("C-c")
    term.wait_for("EXIT=", timeout=90)
    assert "EXIT=0" in term.screen()
    _, alive = psutil.wait_procs([space, *started], timeout=30)
    assert not alive, f"left running after Ctrl-C: {alive}"


@contextmanager
def notebook_at(browser, url: str):
    """A page on ``url``, once the notebook's Crystal kernel is connected and idle."""
    with blank_page(browser) as page:
        page.set_default_timeout(60_000)
        page.goto(url)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=120_000)
        page.wait_for_function(READY, arg="crystal", timeout=120_000)
        yield page


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def test_space_opens_a_crystal_notebook_and_disable_tool_reaches_the_kernel(browser, tmp_path):
    """MODE-7 / FL-* through `crystal space`: the model is offered no bash, and a bash call
    it makes anyway is refused; Ctrl-C then stops everything."""
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
               {"text": "No bash in this space."}]
    with LLMServer(replies) as server, space_in_terminal(tmp_path, server, "--disable-tool", "bash") as (
            term, url, workspace):
        notebook = URL.search(url).group(1)
        assert re.fullmatch(r"crystal-\d{4}-\d\d-\d\d\.ipynb", notebook), notebook
        assert (workspace / notebook).is_file()
        with notebook_at(browser, url) as page:
            # JupyterLab opened the space's notebook, on a Crystal kernel.
            assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path") == notebook
            type_and_run(page, "Run echo hi with bash.")
            page.locator(NB).get_by_text("No bash in this space.").wait_for(timeout=90_000)
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "crystal-space.png"))
        # TRUST-6: the space holds the model key out of its own environment; its Crystal
        # kernel got it (the model server saw it).
        assert "test-key" not in " ".join(the_space(workspace).environ().values())
        assert server.requests[0]["headers"]["authorization"] == "Bearer test-key"
        first, second = server.bodies("chat")[:2]
        assert "bash" not in tool_names(first) and "read" in tool_names(first), tool_names(first)
        refused = [m["content"] for m in second["messages"] if m["role"] == "tool"]
        assert len(refused) == 1 and "Unknown tool 'bash'" in json.dumps(refused[0]), refused
        stop_with_ctrl_c(term, workspace)


def test_space_resume_opens_a_notebook_that_continues_the_saved_session(browser, tmp_path):
    """`crystal space --resume ID`: the notebook it opens names the session, and its first
    cell continues it (the model receives the earlier conversation); the background job
    that cell started ends with the space at Ctrl-C."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    replies = [{"text": "Noted: turquoise."},
               {"tool_calls": [{"name": "bash_start", "arguments": {"command": "sleep 487"}}]},
               {"text": "It was turquoise."}]
    with LLMServer(replies) as server:
        env = server_env(tmp_path, tmp_path / "home", tmp_path / "jupyter", server)
        write_home(tmp_path / "home" / ".crystal")
        run = subprocess.run([CRYSTAL, "run", "--workspace", str(workspace), "Remember the word turquoise."],
                             env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        session_id = re.search(r"Session (\S+) saved", run.stderr).group(1)
        with space_in_terminal(tmp_path, server, "--resume", session_id) as (term, url, _):
            notebook = URL.search(url).group(1)
            assert notebook == f"crystal-{session_id}.ipynb"
            saved = json.loads((workspace / notebook).read_text())
            assert saved["metadata"]["crystal"]["session_id"] == session_id
            with notebook_at(browser, url) as page:
                type_and_run(page, "Which word was it?")
                note = page.locator(NB).get_by_text("Continuing this notebook's session")
                note.wait_for(timeout=90_000)
                page.locator(NB).get_by_text("It was turquoise.").wait_for(timeout=90_000)
                assert session_id in note.inner_text()
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "crystal-space-resume.png"))
            users = [m["content"] for m in server.bodies("chat")[-1]["messages"] if m["role"] == "user"]
            assert "Remember the word turquoise." in json.dumps(users) and "Which word was it?" in json.dumps(users)
            # A background job of the kernel is running; Ctrl-C ends it with the kernel.
            assert sleeps(), "the background job did not start"
            stop_with_ctrl_c(term, workspace)
            _, alive = psutil.wait_procs(sleeps(), timeout=20)
            assert not alive, f"the kernel's job outlived the space: {alive}"


def sleeps() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if (proc.info["cmdline"] or [])[:2] == ["sleep", "487"]:
            found.append(proc)
    return found


def test_space_refuses_a_session_that_is_not_saved_and_starts_nothing(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = dict(os.environ, CRYSTAL_HOME=str(tmp_path / "home"))
    out = subprocess.run([CRYSTAL, "space", "--workspace", str(workspace), "--resume", "20260101-000000-abcdef",
                          "--no-browser"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"crystal: There is no saved session 20260101-000000-abcdef in {workspace} (crystal run /sessions lists them)."]
    assert list(workspace.iterdir()) == []
    bad = subprocess.run([CRYSTAL, "space", "--workspace", str(workspace), "--disable-tool", "nosuch"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert list(workspace.iterdir()) == []
