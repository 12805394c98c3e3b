"""A real Crystal kernel under jupyter_client, pointed at the loopback model server.

One kernel is shared by the tests of this folder (starting one takes about a second);
each test resets what it relies on (approval, mode, the server's queue) through
:func:`reset`. Tests that need other process flags or a restart start their own.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from crystal_kernel.jupyter.driver import KernelDriver
from crystal_kernel.jupyter.kernelspec import kernel_json
from crystal_kernel.testing.folder_shared import FolderShared
from crystal_kernel.testing.llm_server import LLMServer

KEY_ENV = "CRYSTAL_TEST_KEY"


@dataclass
class Kernel:
    km: KernelManager
    driver: KernelDriver
    server: LLMServer
    home: Path
    workspace: Path
    notebook: str

    def run(self, code: str, **kw: Any):
        return self.driver.execute(code, **kw)

    def reset(self, approval: str = "default", mode: str = "work") -> None:
        """Empty the model queue and put the session back to a known state."""
        self.server.clear()
        run = self.run(f"/approval {approval}\n/mode {mode}")
        assert run.status == "ok", run.texts()

    def last_body(self) -> dict[str, Any]:
        return self.server.bodies("chat")[-1]

    def stop(self) -> None:
        self.driver.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def make_home(root: Path) -> Path:
    home = root / "home"
    (home / ".crystal").mkdir(parents=True)
    (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False}), encoding="utf-8")
    return home


def write_spec(tmp: Path, flags: list[str] = ()) -> Path:
    """A kernelspec folder for this Python; returns the kernels/ folder holding it."""
    spec_dir = tmp / "kernels" / "crystal"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps(kernel_json(list(flags), python=sys.executable)))
    return spec_dir.parent


def kernel_env(home: Path, server: LLMServer, notebook: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CRYSTAL_ARGS", "CRYSTAL_APPROVAL"):
        env.pop(var, None)
    env.update({
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
        "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_API_KEY_ENV": KEY_ENV,
        KEY_ENV: "test-key", "JPY_SESSION_NAME": notebook,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    env.update(extra or {})
    return env


def ipc_kernel_manager(tmp: Path, kernel_name: str, kernel_dirs: list[Path],
                       manager_class: type = KernelManager) -> Any:
    """A kernel manager whose kernel talks over unix sockets under ``tmp``, not TCP.

    With TCP, jupyter_client picks free ports by binding port 0 and closing the socket,
    then the kernel binds them: a parallel test binding port 0 in between gets one of
    those ports, the kernel dies with "Address already in use" and the test's listener
    counts connections it never expected (both seen in one CI run). Socket files under
    the test's own folder cannot collide. The kernel's behaviour does not depend on the
    transport; the browser tests still run their kernels over TCP, as Jupyter does."""
    prefix = tmp / "kernel-ipc"
    if len(str(prefix)) > 90:  # a unix socket path holds at most 107 bytes
        prefix = Path(tempfile.mkdtemp(prefix="crystal-kipc-")) / "k"
    return manager_class(kernel_name=kernel_name, transport="ipc", ip=str(prefix),
                         kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(d) for d in kernel_dirs]))


def start_own_spec(tmp: Path, name: str, argv: list[str], display_name: str,
                   env: dict[str, str], workspace: Path) -> tuple[KernelManager, Any]:
    """A kernelspec of the test's own (``argv`` with ``{connection_file}``) under ``tmp``,
    started in ``workspace``: its manager and a client with channels open. The caller
    shuts both down."""
    spec = tmp / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": display_name, "language": "markdown", "interrupt_mode": "message"}))
    km = ipc_kernel_manager(tmp, name, [spec.parent])
    km.start_kernel(env=env, cwd=str(workspace))
    kc = km.client()
    kc.start_channels()
    return km, kc


def start_kernel(tmp: Path, server: LLMServer, *, flags: list[str] = (), env_extra: dict[str, str] | None = None,
                 home: Path | None = None, workspace: Path | None = None, notebook: str | None = None,
                 widgets: bool = True, stderr: Any = None) -> Kernel:
    """``widgets=False``: the client speaks no comms, like nbclient (front_ends.py);
    ``stderr``: a file for the kernel's log."""
    home = home or make_home(tmp)
    workspace = workspace or (tmp / "ws")
    workspace.mkdir(exist_ok=True)
    kernels = write_spec(tmp, flags)
    notebook = notebook or str(workspace / "analysis.ipynb")
    env = kernel_env(home, server, notebook, env_extra)
    km = ipc_kernel_manager(tmp, "crystal", [kernels])
    km.start_kernel(env=env, cwd=str(workspace), **({"stderr": stderr} if stderr is not None else {}))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return Kernel(km, KernelDriver(kc, widgets=widgets), server, home, workspace, notebook)


@pytest.fixture(scope="session")
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server


# The folder's shared kernel, stopped after the folder's last test (FolderShared).
_shared: FolderShared[Kernel] = FolderShared(Path(__file__).resolve().parent)


@pytest.fixture
def shared_kernel(llm_server, tmp_path_factory):
    return _shared.get(lambda: start_kernel(tmp_path_factory.mktemp("kernel"), llm_server, env_extra=_shared.env()),
                       Kernel.stop)


def pytest_runtest_teardown(item, nextitem):
    _shared.teardown(nextitem)


@pytest.fixture
def kernel(shared_kernel):
    shared_kernel.reset()
    return shared_kernel


class KernelFactory:
    """Start extra kernels (other flags, restarts); all are stopped after the test."""

    def __init__(self, tmp: Path, server: LLMServer):
        self.tmp = tmp
        self.server = server
        self.started: list[Kernel] = []
        self.make_home = make_home
        self.write_spec = write_spec
        self.kernel_env = kernel_env

    def start(self, **kw: Any) -> Kernel:
        kernel = start_kernel(self.tmp, self.server, **kw)
        self.started.append(kernel)
        return kernel


@pytest.fixture
def kernel_factory(llm_server, tmp_path):
    factory = KernelFactory(tmp_path, llm_server)
    llm_server.clear()
    yield factory
    for kernel in factory.started:
        kernel.stop()
