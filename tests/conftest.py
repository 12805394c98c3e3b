"""Test-wide guards: no network beyond loopback, and a private Home for every test.

The network guard patches socket connects in this process (child processes started by
tests are pointed at the loopback model server explicitly, and run with the same HOME).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

import pytest

# A process a folder shares across its modules (its conftest stops it after the folder's
# last test) carries this variable, naming the folder; it is left alone while the next
# test is in that folder, and is a leftover like any other once the folder is done.
from crystal_kernel.testing.folder_shared import SHARED_IN_FOLDER

# jsonschema (imported here by nbformat, jupyter_server's events and the MCP SDK) builds
# rfc3987-syntax's Earley grammar for its optional "iri" format check as it is imported:
# ~2.6 s of CPU in every pytest process, seven of them in `make test` (each parallel
# worker collects the whole suite, then the serial part). No test checks "iri" formats in
# this process, and jsonschema leaves the check out when the module is absent, as
# Crystal's own fronts do (crystal_kernel/cli). Child processes are not affected: a
# kernel, a lab or a `crystal` command a test starts imports what it always does.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]

# Child processes must find the venv's tools (crystal, rg, jupyter) first.
_bin = str(Path(sys.executable).parent)
if not os.environ.get("PATH", "").startswith(_bin):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")

for _var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "CRYSTAL_PROVIDER", "CRYSTAL_MODEL", "CRYSTAL_BASE_URL", "CRYSTAL_API_KEY_ENV", "CRYSTAL_APPROVAL"):
    os.environ.pop(_var, None)

# Topic naming (PH-11) sends one extra request after a session's first turn; tests that
# script model replies would see it take one. host/topic.py honours this switch; tests of
# topic naming turn it back on with monkeypatch.
os.environ["CRYSTAL_TOPIC_NAMING"] = "off"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s workers take whole groups (a module, a folder sharing a kernel, the
    browser tests), longest first: tests/parallel.py."""
    from tests.parallel import make_scheduler

    return make_scheduler(config, log)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(config, items):
    """The tests listed in tests/parallel.py's SERIAL are marked ``serial``. In an xdist
    worker, the groups that take longest come first; a plain run keeps pytest's order."""
    from tests.parallel import is_serial, rank

    for item in items:
        if is_serial(item.nodeid):
            item.add_marker(pytest.mark.serial)
    # `make test`'s parallel part names a folder where each process that collects lists the
    # tests marked serial, so that its serial part collects only their files
    # (crystal_kernel/testing/run_tests.py). Taken out of the environment here, before any
    # test runs, so that no process a test starts lists anything there.
    listed = os.environ.pop("CRYSTAL_TEST_SERIAL_LISTED", "")
    if listed:
        serial = [item.nodeid for item in items if item.get_closest_marker("serial")]
        Path(listed, f"{os.getpid()}.txt").write_text("\n".join(serial), encoding="utf-8")
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: rank(item.nodeid))  # stable: each group keeps its order


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory, monkeypatch):
    """HOME and CRYSTAL_HOME point at a fresh temporary folder for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRYSTAL_HOME", str(home / ".crystal"))
    (home / ".crystal").mkdir()
    yield home / ".crystal"


@pytest.fixture(autouse=True)
def held_keys_given_back(monkeypatch):
    """A test that opens a session in this process goes through the front door, which
    withdraws the model key variables from os.environ into the host's holder (TRUST-6).
    They go back before monkeypatch restores the environment, so no key a test set
    outlives it (in the holder, redaction and key lookups of later tests would find it)."""
    yield
    from crystal_kernel.core.secrets import held_keys, restore_keys

    restore_keys(list(held_keys()))


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


# --- No test module may leave a child process of this pytest process running -----------
# A kernel, server or job a module started and did not stop is seen by later modules (tests
# that count kernels or processes failed in the full suite because of one). After the last
# test of each module (its module fixtures already torn down), every live child process of
# pytest that was not there when the session started is reported as a teardown error of
# that test, then ended so that later modules start clean. Resources a folder shares
# across its modules are stopped by that folder's conftest when its last test ends.
_LEFTOVER_GRACE = 5.0
_session_children: set[int] = set()



def _live_children(next_path: Path | None) -> list:
    import psutil

    from crystal_kernel.jobs.spawner import helper_pids

    found = []
    # The spawn server and its servers of one sandbox (jobs/spawner.py) live as long as
    # this process, by design.
    helpers = helper_pids()
    me = os.getpid()
    marks: dict[int, str | None] = {}

    def shared_in(proc) -> str | None:
        """The folder ``proc`` is shared in: its own SHARED_IN_FOLDER when it has the
        variable (empty: not shared, as a kernel a shared lab started for a module), else
        its parent's. Chromium overwrites its helper processes' environment block (their
        process titles), so those are judged by the browser that started them."""
        if proc.pid not in marks:
            environ = proc.environ()
            if SHARED_IN_FOLDER in environ:
                marks[proc.pid] = environ[SHARED_IN_FOLDER] or None
            else:
                parent = proc.parent()
                marks[proc.pid] = None if parent is None or parent.pid == me else shared_in(parent)
        return marks[proc.pid]

    for proc in psutil.Process(me).children(recursive=True):
        try:
            if proc.pid in _session_children or proc.pid in helpers or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            folder = shared_in(proc)
            if folder and next_path is not None and Path(folder) in next_path.parents:
                continue
            found.append(proc)
        except psutil.Error:
            continue
    return found


def pytest_sessionstart(session):
    import psutil

    _session_children.update(p.pid for p in psutil.Process(os.getpid()).children(recursive=True))


def _describe(proc) -> str:
    import psutil

    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {proc.pid}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if nextitem is not None and nextitem.path == item.path:
        return result
    import time

    import psutil

    # Processes a module just ended may take a moment to exit (a kernel's shutdown).
    deadline = time.monotonic() + _LEFTOVER_GRACE
    next_path = None if nextitem is None else nextitem.path
    left = _live_children(next_path)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _live_children(next_path)
    if not left:
        return result
    described = [_describe(p) for p in left]
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)
    raise AssertionError(
        f"{item.path.name} left {len(left)} child process(es) of pytest running after its last test "
        f"(ended now so later modules start clean); stop them in the module's fixtures:\n  " + "\n  ".join(described))


@pytest.fixture
def landlock_path(monkeypatch):
    """Tool processes confined by the Landlock path (SANDBOX-2's fallback), not bubblewrap:
    for tests that read process ids a command prints after it ended (inside bubblewrap's
    PID namespace they are not the host's, and tests/sandbox_pids.py finds only live
    processes), and for a background job's exit by signal (a job's own bwrap reports a
    signal death as 128+N)."""
    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "landlock")
