"""SANDBOX-2: ``crystal space`` keeps its host state out of reach.

The space's kernelspec (whose ``argv`` its next Crystal kernel runs, as the host, with
the model key) lived in ``$TMPDIR/crystal-space-*``: a sandboxed command rewrote it and
the next kernel ran the command's argv unsandboxed. The kernelspec and the space's
Jupyter runtime files (the server's token, the kernels' connection keys) now live in
the space's host-only folder ``{crystal home}/run/space-<pid>`` (0700), out of the
sandbox's reach. A real ``crystal space`` (JupyterLab without a browser, driven through
its REST API), a real ``crystal run`` in ``full`` approval whose ``bash`` attacks it (on
each sandbox mechanism), and a real Crystal kernel started from the kernelspec after."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from jupyter_client.blocking import BlockingKernelClient

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.host_folders import process_folder, remove_folder
from crystal_kernel.jobs import landlock
from crystal_kernel.testing.llm_server import LLMServer
from tests.e2e.conftest import JUPYTER_AI_SERVER_EXTENSIONS, free_port

CRYSTAL = str(Path(sys.executable).parent / "crystal")
URL = re.compile(r"(http://\S+?)/lab/tree/\S+\?token=([0-9a-f]+)")
MECHANISMS = [m for m in ("bubblewrap", "landlock") if m == "landlock" or shutil.which("bwrap")]

pytestmark = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 (this machine has 7)")


class Space:
    """``crystal space --no-browser`` in a process group of its own, its output read by a thread."""

    def __init__(self, workspace: Path, env: dict[str, str]):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [CRYSTAL, "space", "--workspace", str(workspace), "--no-browser", "--port", str(free_port()),
             "--", "--allow-root", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_url(self, timeout: float = 120) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "".join(self.lines)
            if "Ctrl-C stops the space" in text:
                match = URL.search(text)
                assert match, text
                return match.group(1), match.group(2)
            assert self.proc.poll() is None, text
            time.sleep(0.2)
        raise AssertionError("the space did not start:\n" + "".join(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def api(base: str, token: str, path: str, body: dict | None = None, method: str | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{base}{path}", data=data, method=method or ("POST" if data else "GET"),
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else {}


def environment(tmp_path: Path, server: LLMServer) -> dict[str, str]:
    """A private HOME and Crystal Home, Jupyter's folders and TMPDIR inside ``tmp_path``,
    Crystal pointed at the loopback model server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "CRYSTAL_")) and k != "OPENAI_API_KEY"}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": dict.fromkeys(JUPYTER_AI_SERVER_EXTENSIONS, False)}}))
    (tmp_path / "temp").mkdir()
    env.update({"HOME": str(tmp_path / "home"), "CRYSTAL_HOME": str(tmp_path / "home" / ".crystal"),
                "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
                "JUPYTER_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path / "temp"),
                "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
                "OPENAI_API_KEY": "sk-test", "CRYSTAL_TOPIC_NAMING": "off"})
    (tmp_path / "home" / ".crystal").mkdir(parents=True)
    return env


def ready(connection_file: Path, code: str | None = None) -> str:
    """Wait until the kernel of ``connection_file`` answers; run ``code`` there and
    return what it printed."""
    printed: list[str] = []
    deadline = time.monotonic() + 90
    while True:
        # The server writes the connection file as it starts the kernel: a client that
        # connects first takes a heartbeat not yet answered for "died" (seen at load 18).
        # A client's channels start once: each try has its own.
        client = BlockingKernelClient(connection_file=str(connection_file))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=max(1.0, deadline - time.monotonic()))
            break
        except RuntimeError:
            client.stop_channels()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    try:
        if code is not None:
            reply = client.execute_interactive(code, timeout=60, output_hook=lambda msg: printed.append(
                msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""))
            assert reply["content"]["status"] == "ok", (reply["content"], printed)
    finally:
        client.stop_channels()
    return "".join(printed)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_sandboxed_command_cannot_rewrite_the_spaces_kernelspec__SANDBOX_2(tmp_path, mechanism):
    """SANDBOX-2: the space's kernelspec and runtime files are in
    ``{crystal home}/run/space-<pid>`` (0700; nothing of the space in temp, nor in the
    person's Jupyter runtime folder); a ``bash`` of ``crystal run --approval full`` that
    rewrites every space kernelspec it can reach changes nothing, and the next Crystal
    kernel of the space starts from the space's own spec (no marker from the attacker's
    argv). A stale folder of a dead space is removed at start, and the space's own is
    removed when it stops."""
    workspace, marker = tmp_path / "ws", tmp_path / "markers" / "PWNED"
    workspace.mkdir()
    marker.parent.mkdir()
    with LLMServer(max_hang=20) as server:
        env = environment(tmp_path, server)
        home, temp = Path(env["CRYSTAL_HOME"]), Path(env["TMPDIR"])
        (home / "run").mkdir(mode=0o755)
        os.chmod(home / "run", 0o755)  # a wider mode is narrowed: the folder is ours
        stale = home / "run" / f"space-{dead_pid()}"
        (stale / "kernels" / "crystal").mkdir(parents=True)
        space = Space(workspace, env)
        try:
            base, token = space.wait_url()
            own = home / "run" / f"space-{space.proc.pid}"
            spec = own / "kernels" / "crystal" / "kernel.json"
            assert spec.is_file() and "--workspace" in json.loads(spec.read_text())["argv"]
            assert stat.S_IMODE(os.lstat(home / "run").st_mode) == 0o700
            assert stat.S_IMODE(os.lstat(own).st_mode) == 0o700
            assert not stale.exists()
            assert list(temp.glob("crystal-space-*")) == []
            assert (own / "runtime" / f"jpserver-{space.proc.pid}.json").is_file()
            assert not (tmp_path / "runtime" / f"jpserver-{space.proc.pid}.json").exists()
            original = spec.read_text()

            evil = json.dumps({"argv": ["sh", "-c", f"touch {marker}; sleep 30"], "display_name": "Crystal",
                               "language": "python", "metadata": {"crystal": True}})
            attack = (f"for f in {temp}/crystal-space-*/kernels/crystal/kernel.json "
                      f"{home}/run/space-*/kernels/crystal/kernel.json; do [ -e \"$f\" ] || continue; "
                      f"printf '%s' '{evil}' > \"$f\" && echo \"rewrote $f\"; done; echo attack over")
            server.add({"tool_calls": [{"name": "bash", "arguments": {"command": attack}}]}, {"text": "done"})
            # Another session of the same person (another workspace), whose bash runs in the sandbox.
            (tmp_path / "other").mkdir()
            run = subprocess.run([CRYSTAL, "run", "go", "--workspace", str(tmp_path / "other"), "--format", "jsonl",
                                  "--approval", "full"], capture_output=True, text=True, timeout=120,
                                 env=dict(env, CRYSTAL_SANDBOX_MECHANISM=mechanism), cwd=tmp_path)
            assert run.returncode == 0, run.stderr
            results = [e for e in map(json.loads, run.stdout.splitlines()) if e["type"] == "tool_result"]
            assert "attack over" in results[0]["text"] and "rewrote" not in results[0]["text"], results[0]["text"]
            assert spec.read_text() == original

            # The next Crystal kernel of the space starts from the space's own spec and answers.
            kernel = api(base, token, "/api/kernels", {"name": "crystal"})
            ready(own / "runtime" / f"kernel-{kernel['id']}.json")
            assert not marker.exists(), "the space ran the argv a sandboxed command wrote"
            # A kernel of the space still finds the space's server in its host-only runtime
            # folder (what the Crystal kernels' live notebook edits look up).
            python = api(base, token, "/api/kernels", {"name": "python3"})
            code = ("from pathlib import Path\nfrom crystal_kernel.jupyter.live_notebook import find_server\n"
                    f"print('server', (find_server(Path({str(workspace / 'n.ipynb')!r})) or {{}}).get('pid'))")
            assert f"server {space.proc.pid}" in ready(own / "runtime" / f"kernel-{python['id']}.json", code)
            api(base, token, f"/api/kernels/{python['id']}", method="DELETE")
            api(base, token, f"/api/kernels/{kernel['id']}", method="DELETE")
        finally:
            space.stop()
    assert space.proc.returncode == 0, "".join(space.lines)
    assert not own.exists()  # removed when the space stopped


def test_a_linked_run_folder_is_refused_in_one_line(tmp_path):
    """SANDBOX-2: a ``run`` folder in the Crystal Home that is a symbolic link (the host
    would keep its state where the link's owner decides) stops ``crystal space`` before
    anything starts, with one line, and nothing is written through the link."""
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    home = tmp_path / "home" / ".crystal"
    home.mkdir(parents=True)
    (home / "run").symlink_to(elsewhere)
    env = dict(os.environ, HOME=str(tmp_path / "home"), CRYSTAL_HOME=str(home))
    out = subprocess.run([CRYSTAL, "space", "--workspace", str(workspace), "--no-browser"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines == [f"crystal: Crystal's host-only folder {home / 'run'} is a symbolic link; remove it (Crystal "
                     "makes the folder itself)."], lines
    assert list(elsewhere.iterdir()) == []


def test_the_host_only_folder_is_checked_made_private_and_cleaned_in_bounds(tmp_path):
    """SANDBOX-2: ``process_folder`` (what ``crystal space`` and ``crystal kernel install``
    take) refuses a ``run`` that is a file or someone else's folder in one line, and
    removes at most 16 stale folders of dead processes at one start (the rest at the
    next), never a folder of a live process nor one that is not a process's."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "run").write_text("not a folder")
    with pytest.raises(UserError) as refused:
        process_folder(home, "space")
    assert str(refused.value) == f"Crystal's host-only folder {home / 'run'} is not a folder; remove it."
    (home / "run").unlink()
    (home / "run").mkdir(mode=0o700)
    if os.getuid() == 0:  # only root can make a folder someone else's
        os.chown(home / "run", 54321, 54321)
        with pytest.raises(UserError, match=r"belongs to another user \(uid 54321\); remove it\.$"):
            process_folder(home, "space")
        os.chown(home / "run", 0, 0)
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # above every process number
    for n in range(20):
        (home / "run" / f"space-{gone + n}").mkdir()
    (home / "run" / f"space-{os.getppid()}").mkdir()  # a live process's
    (home / "run" / "notes").mkdir()  # not a process's
    mine = process_folder(home, "space")
    assert mine == home / "run" / f"space-{os.getpid()}" and stat.S_IMODE(os.lstat(mine).st_mode) == 0o700
    left = sorted(p.name for p in (home / "run").iterdir())
    assert len([n for n in left if n[6:].isdigit() and int(n[6:]) >= gone]) == 20 - 16, left
    assert f"space-{os.getppid()}" in left and "notes" in left
    process_folder(home, "space")
    assert not [n for n in (p.name for p in (home / "run").iterdir()) if n[6:].isdigit() and int(n[6:]) >= gone]
    remove_folder(mine)
    assert not mine.exists()
