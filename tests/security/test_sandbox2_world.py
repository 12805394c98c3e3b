"""SANDBOX-2: a tool process starts in a world built from an allow list.

Each attack below is a `bash` call the model makes in `full` approval through a real
`crystal run` (the loopback model server scripts the call); the test then looks at the host
and at what the model received. Every attack below fails on both paths: bubblewrap's
world, and the Landlock fallback's namespace (jobs/landlock_world.py; docs/security.md,
"The Landlock fallback (SANDBOX-2)", lists what it does not give).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from crystal_kernel.jobs import bwrap, landlock
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
ORIGINAL = "Original work prompt.\n"

pytestmark = pytest.mark.skipif(landlock.abi_version() < 6, reason="needs Landlock ABI 6 (this machine has 7)")


@pytest.fixture
def layout():
    """Home outside every temp folder (under the user's real cache), the workspace in it."""
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    root = real_home / ".cache" / "crystal-sandbox-tests" / uuid.uuid4().hex
    home = root / "home"
    ws = home / "ws"
    (ws / ".crystal" / "prompts").mkdir(parents=True)
    (ws / ".crystal" / "prompts" / "work.md").write_text(ORIGINAL)
    (home / ".crystal").mkdir()
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-TEXT\n")
    yield home, ws
    shutil.rmtree(root, ignore_errors=True)


def crystal_run(home: Path, ws: Path, commands: list[str], mechanism: str,
                extra: dict[str, str] | None = None) -> tuple[list[dict], list[str], list]:
    """One `crystal run` whose model makes each bash call in turn; the tool results, the
    notes, and every request the model server received. ``extra``: more environment."""
    replies = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands] + [{"text": "done"}]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI_", "ANTHROPIC_"))}
    with LLMServer(replies) as server:
        env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_SANDBOX_MECHANISM": mechanism,
                    "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
                    "OPENAI_API_KEY": "sk-test", **(extra or {})})
        out = subprocess.run([CRYSTAL, "run", "go", "--workspace", str(ws), "--format", "jsonl", "--approval", "full"],
                             capture_output=True, text=True, env=env, timeout=120)
        requests = list(server.requests)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    return ([e for e in events if e["type"] == "tool_result"], [e.get("text", "") for e in events if e["type"] == "note"],
            requests)


BOTH = ["landlock", "bubblewrap"]


@pytest.fixture(params=BOTH)
def mechanism(request):
    if request.param == "bubblewrap":
        assert bwrap.program() is not None, "bubblewrap does not work here (make test installs Debian's bubblewrap)"
    return request.param


def test_a_held_folder_handle_of_the_parent_writes_nothing__defect_1(layout, mechanism):
    home, ws = layout
    attack = ("for fd in /proc/$PPID/fd/* /proc/[0-9]*/fd/*; do echo INJECTED >> $fd/prompts/work.md 2>/dev/null;"
              " echo INJECTED >> $fd/config.json 2>/dev/null; done; true")
    crystal_run(home, ws, [attack], mechanism)
    assert (ws / ".crystal/prompts/work.md").read_text() == ORIGINAL
    assert not (home / ".crystal/config.json").exists()


def test_only_the_three_standard_descriptors_cross(layout, mechanism):
    home, ws = layout
    results, _, _ = crystal_run(home, ws, ["for fd in /proc/self/fd/*; do echo \"fd=${fd##*/}\"; done"], mechanism)
    fds = sorted(int(w[3:]) for w in results[0]["text"].split() if w.startswith("fd="))
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, results[0]["text"]  # the 4th: the glob's own folder


def test_a_host_process_cannot_be_signalled(layout, mechanism):
    home, ws = layout
    victim = subprocess.Popen(["sleep", "60"])
    try:
        crystal_run(home, ws, [f"kill -TERM {victim.pid}; kill -KILL {victim.pid}; true"], mechanism)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_the_signing_key_and_credentials_are_unreadable_and_never_reach_the_model(layout, mechanism):
    home, ws = layout
    command = f"cat {home}/.crystal/session-key; cat {home}/.ssh/id_rsa; ls -a {home}/.crystal"
    results, _, requests = crystal_run(home, ws, [command], mechanism)
    key = (home / ".crystal/session-key").read_bytes()
    sent = json.dumps(requests)
    assert "PRIVATE-KEY-TEXT" not in results[0]["text"] and "PRIVATE-KEY-TEXT" not in sent
    assert key.hex() not in sent and key.decode("latin-1") not in results[0]["text"]
    listed = results[0]["text"].splitlines()
    assert "session-key" not in listed and "." in listed  # the Crystal Home is an empty folder there


def test_the_persons_terminal_is_out_of_reach__defect_5(layout, mechanism):
    home, ws = layout
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        crystal_run(home, ws, [f"printf 'PWNED\\033]52;c;cHduZWQ=\\a' > {name}; true"], mechanism)
        os.set_blocking(master, False)
        try:
            got = os.read(master, 4096)
        except BlockingIOError:
            got = b""
        assert b"PWNED" not in got
    finally:
        os.close(master)
        os.close(slave)


def test_no_udp_and_no_unix_socket_of_a_host_service_without_sandbox_network__defect_6(layout, mechanism):
    home, ws = layout
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    folder = Path(tempfile.mkdtemp(prefix="crystal-service-"))
    service = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    service.bind(str(folder / "agent.sock"))
    service.listen(1)
    service.settimeout(0.5)
    try:
        probe = (f"import socket; s=socket.socket(socket.AF_UNIX); s.connect({str(folder / 'agent.sock')!r}); "
                 "s.send(b'probe')")
        crystal_run(home, ws, [f"echo leak > /dev/udp/127.0.0.1/{udp.getsockname()[1]}; "
                               f"{sys.executable} -c \"{probe}\"; true"], mechanism)
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)
        with pytest.raises(TimeoutError):
            service.accept()
    finally:
        udp.close()
        service.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_temp_is_private_to_the_session_and_kept_between_its_calls(layout, mechanism):
    home, ws = layout
    name = f"crystal-leak-{uuid.uuid4().hex}"
    results, _, _ = crystal_run(home, ws, [f"echo secret > /tmp/{name}", f"cat /tmp/{name}"], mechanism)
    assert "secret" in results[1]["text"]
    assert not (Path(tempfile.gettempdir()) / name).exists() and not Path("/tmp", name).exists()


def test_home_inside_a_temp_folder_keeps_the_workspace_writable__defect_11(tmp_path, mechanism):
    """HOME=/tmp/…/home (CI runners, containers) with no ~/.ssh: the workspace stays
    writable, .crystal/ and the Crystal Home do not."""
    home = tmp_path / "home"
    ws = home / "ws"
    (ws / ".crystal/prompts").mkdir(parents=True)
    (ws / ".crystal/prompts/work.md").write_text(ORIGINAL)
    (home / ".crystal").mkdir()
    results, _, _ = crystal_run(home, ws, ["touch made.txt && echo made",
                                           "echo INJECTED > .crystal/prompts/work.md; echo x > ~/.crystal/config.json;"
                                           " mkdir -p ~/.ssh; true"], mechanism)
    assert results[0]["ok"] and (ws / "made.txt").exists(), results[0]["text"]
    assert (ws / ".crystal/prompts/work.md").read_text() == ORIGINAL
    assert not (home / ".crystal/config.json").exists() and not (home / ".ssh").exists()


def test_the_access_listing_says_which_sandbox_runs(layout, mechanism):
    home, ws = layout
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_SANDBOX_MECHANISM": mechanism,
                "CRYSTAL_PROVIDER": "replay"})
    out = subprocess.run([CRYSTAL, "run", "/access", "--workspace", str(ws)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert ("Sandbox: bubblewrap" if mechanism == "bubblewrap" else "Sandbox: Landlock") in out.stdout, (
        out.stdout + out.stderr)



def test_landlock_without_a_user_namespace_is_not_the_fallback_and_asks(layout):
    """SANDBOX-2 on a system where Landlock works but no user namespace can be made
    (CRYSTAL_SANDBOX_NAMESPACE=0 pretends so): Landlock alone could not hide the Crystal
    Home and credentials nor cut the network, so the sandbox counts as missing: the
    session says so, /access says none is available, and in `full` approval with nobody
    to ask the command does not run (the signing key is not read)."""
    home, ws = layout
    extra = {"CRYSTAL_SANDBOX_NAMESPACE": "0"}
    results, notes, requests = crystal_run(home, ws, [f"cat {home}/.ssh/id_rsa"], "landlock", extra)
    assert not results[0]["ok"] and "PRIVATE-KEY-TEXT" not in json.dumps(requests)
    assert any("not available" in n and "user namespace" in n for n in notes), notes
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_SANDBOX_MECHANISM": "landlock",
                "CRYSTAL_PROVIDER": "replay", **extra})
    out = subprocess.run([CRYSTAL, "run", "/access", "--workspace", str(ws)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert "Sandbox: none available" in out.stdout, out.stdout + out.stderr


@pytest.fixture(params=["srv", "tmp", "home"])
def placed_workspace(request, layout):
    """SANDBOX-2 item 5: the workspace in /srv, in /tmp or in Home (Home outside temp)."""
    home, in_home = layout
    if request.param == "home":
        yield home, in_home
        return
    base = Path("/srv" if request.param == "srv" else tempfile.gettempdir()) / f"crystal-layout-{uuid.uuid4().hex}"
    ws = base / "ws"
    (ws / ".crystal" / "prompts").mkdir(parents=True)
    (ws / ".crystal" / "prompts" / "work.md").write_text(ORIGINAL)
    (ws / "data.txt").write_text("the data\n")
    yield home, ws
    shutil.rmtree(base, ignore_errors=True)


def test_the_workspace_works_wherever_it_lies(placed_workspace, mechanism):
    """Wherever the workspace lies, a command reads and writes it, makes new top-level
    entries, and still cannot write its .crystal/ or the Crystal Home."""
    home, ws = placed_workspace
    (ws / "data.txt").write_text("the data\n")
    results, _, _ = crystal_run(home, ws, ["cat data.txt && mkdir -p out && cp data.txt out/copy.txt && echo copied",
                                           "echo INJECTED > .crystal/prompts/work.md; echo x > ~/.crystal/config.json;"
                                           " true"], mechanism)
    assert results[0]["ok"] and "the data" in results[0]["text"] and "copied" in results[0]["text"], results[0]["text"]
    assert (ws / "out" / "copy.txt").read_text() == "the data\n"
    assert (ws / ".crystal/prompts/work.md").read_text() == ORIGINAL
    assert not (home / ".crystal/config.json").exists()
