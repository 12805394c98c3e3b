"""``crystal space`` starting, as a real process (SPEC §13 Fronts, FL-6): as root (this
machine's user, and Docker's) it starts instead of Jupyter's "Running as root is not
recommended"; its URL is among the first lines, with Jupyter AI's FastMCP banner, its
"Update available" and the servers' INFO lines quieted (errors stay); a start that fails
leaves no ``crystal-YYYY-MM-DD.ipynb`` behind. Jupyter AI's server extensions stay on
here (they are what makes the noise)."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.hub.acl import closed_folders, passable_by

CRYSTAL = str(Path(sys.executable).parent / "crystal")
URL = re.compile(r"http://\S+/lab/tree/crystal-\d{4}-\d{2}-\d{2}\.ipynb\?token=[0-9a-f]+")
ANNOUNCED = "Ctrl-C stops the space"
# Jupyter AI's MCP server listens on 3001 by default: any free port, so that spaces of
# tests running beside this one do not meet there.
MCP_ANY_PORT = "--MCPExtensionApp.mcp_port=0"
GOOD_FLAGS = ("--provider", "replay", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NOKEY",
              "--mode", "plan", "--approval", "edit", "--reasoning", "low", "--prompt-set", "default",
              "--prompt-attachments", "off", "--disable-tool", "bash")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_space(workspace: Path, home: Path, *jupyter: str, user: list[str] | None = None,
                flags: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    # This machine is offline: LiteLLM (Jupyter AI's, when installed) would warn at every
    # start that it cannot fetch its model price list; online it fetches it silently.
    env = {**os.environ, "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("JUPYTER_CONFIG_DIR", None)
    command = [CRYSTAL, "space", "--workspace", str(workspace), "--no-browser", "--port", str(free_port()),
               *flags, "--", MCP_ANY_PORT, *jupyter]
    return subprocess.Popen([*(user or []), *command], env=env, cwd=workspace, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def lines_until_announced(space: subprocess.Popen[str], timeout: float = 150) -> list[str]:
    """The space's output lines up to and including the one that ends its announcement."""
    assert space.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = space.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if ANNOUNCED in line:
            return lines
    raise AssertionError("no URL from crystal space:\n" + "\n".join(lines))


def stop(space: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C (SIGINT), as in a terminal: to the whole foreground process group (through
    ``runuser``, which does not pass a SIGINT of its own on); the space stops and says so."""
    os.killpg(space.pid, signal.SIGINT)
    try:
        rest, _ = space.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(space.pid, signal.SIGKILL)
        space.communicate()
        raise
    return space.returncode, rest


def check_started(space: subprocess.Popen[str], workspace: Path) -> None:
    try:
        lines = lines_until_announced(space)
    finally:
        if space.poll() is None:
            code, rest = stop(space)
        else:
            code, rest = space.wait(), space.communicate()[0]
    text = "\n".join(lines)
    assert "Running as root" not in text
    # The URL within the first lines: no server INFO lines, no FastMCP banner before it
    # (~150 lines before). A few lines of other extensions' own warnings may come first
    # (a Jupyter AI package installed without its version file says so; it also prints
    # "Base url is /"): warnings stay visible.
    assert len(lines) <= 10 and URL.search(text), text
    assert not re.search(r"\[I \d|FastMCP|Update available", text + rest), text + rest
    assert code == 0 and "Crystal space: stopped." in rest, (code, rest)
    assert not re.search(r"FastMCP|Update available|INFO:", rest), rest
    # No traceback at the stop (the collaboration server's known stop race was one).
    assert "Traceback" not in rest and "never retrieved" not in rest, rest
    assert [p.name for p in workspace.glob("crystal-*.ipynb")] and not list(workspace.glob("*-2.ipynb"))


@pytest.mark.skipif(os.geteuid() != 0, reason="runs crystal space as root; this test process is not root")
def test_space_as_root_starts_and_shows_its_url_in_the_first_lines(workspace, tmp_path):
    """FL-6 / SPEC §13: as root, crystal space passes Jupyter's allow-root (as make lab
    does) and the notebook's URL comes first, the other servers' noise quieted. It takes
    the process and model flags the other fronts take (tests/cli/test_fronts_flags.py)."""
    check_started(start_space(workspace, tmp_path / "home", flags=GOOD_FLAGS), workspace)


def test_a_start_that_fails_leaves_no_notebook_and_its_error_shows(workspace, tmp_path):
    """A server that cannot start (its port taken, no other tried) exits non-zero with
    Jupyter's error visible, and the notebook the space made for it is gone again."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "HOME": str(tmp_path / "home")}
        out = subprocess.run([CRYSTAL, "space", "--workspace", str(workspace), "--no-browser", "--port", str(port),
                              "--", MCP_ANY_PORT, "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0"],
                             env=env, capture_output=True, text=True, timeout=150)
    assert out.returncode != 0, out
    assert f"port {port} is not available" in out.stderr, out
    assert "Running as root" not in out.stdout + out.stderr
    assert list(workspace.iterdir()) == []


def test_a_start_refused_as_root_leaves_no_notebook(workspace, tmp_path):
    """Jupyter's own root refusal, kept when the person asks for it after --: one
    critical line, and no crystal-YYYY-MM-DD.ipynb (before, every try left one: -2, -3, …)."""
    if os.geteuid() != 0:
        pytest.skip("Jupyter refuses only root; this test process is not root")
    out = subprocess.run([CRYSTAL, "space", "--workspace", str(workspace), "--no-browser", "--port", str(free_port()),
                          "--", "--ServerApp.allow_root=False"], env={**os.environ, "HOME": str(tmp_path / "home")},
                         capture_output=True, text=True, timeout=150)
    assert out.returncode == 1 and "Running as root is not recommended" in out.stderr, out
    assert list(workspace.iterdir()) == []


@pytest.fixture
def ordinary_user():
    """A temporary ordinary user (removed afterwards), able to run this environment's
    Python, and a folder of its own in /tmp (not under pytest's tmp folder: every pytest
    start chmods that to 0700, which masks a grant to pass it)."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("making a temporary user needs root and useradd")
    name = "crys" + uuid.uuid4().hex[:8]
    base = Path(tempfile.mkdtemp(prefix="crystal-space-user-"))
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(base), name], check=True)
    try:
        uid = pwd.getpwnam(name).pw_uid
        os.chown(base, uid, -1)
        runas = ["runuser", "-u", name, "--"]
        # The venv and its interpreter may lie under folders only root passes (pyenv's
        # /root, CI's checkout): the user may pass through them while the test runs.
        with passable_by(closed_folders(Path(sys.executable)), [uid]):
            reach = subprocess.run([*runas, sys.executable, "-c", "import crystal_kernel"], capture_output=True,
                                   text=True)
            assert reach.returncode == 0, f"the user cannot run this environment's Python: {reach.stderr}"
            yield name, runas, base
    finally:
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_space_as_an_ordinary_user_starts_and_shows_its_url_first(ordinary_user):
    """The same start as an ordinary user: no allow-root needed, the URL first."""
    name, runas, base = ordinary_user
    workspace, home = base / "ws-user", base / "home-user"
    uid = pwd.getpwnam(name).pw_uid
    for path in (workspace, home):
        path.mkdir()
        os.chown(path, uid, -1)
    check_started(start_space(workspace, home, user=runas), workspace)
