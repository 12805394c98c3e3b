"""A real Crystal kernel under jupyter_client, pointed at the loopback model server.

One kernel is shared by the tests of this folder (starting one takes about a second);
each test resets what it relies on (approval, mode, the server's queue) through
:func:`reset`. Tests that need other process flags or a restart start their own.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from crystal_kernel.jupyter.driver import KernelDriver
from crystal_kernel.jupyter.kernelspec import kernel_json
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
        with self.server._lock:  # the server offers no public clear; tests own it
            self.server._replies.clear()
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


def start_kernel(tmp: Path, server: LLMServer, *, flags: list[str] = (), env_extra: dict[str, str] | None = None,
                 home: Path | None = None, workspace: Path | None = None, notebook: str | None = None) -> Kernel:
    home = home or make_home(tmp)
    workspace = workspace or (tmp / "ws")
    workspace.mkdir(exist_ok=True)
    spec_dir = tmp / "kernels" / "crystal"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps(kernel_json(list(flags), python=sys.executable)))
    notebook = notebook or str(workspace / "analysis.ipynb")
    env = dict(os.environ)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CRYSTAL_ARGS", "CRYSTAL_APPROVAL"):
        env.pop(var, None)
    env.update({
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
        "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_API_KEY_ENV": KEY_ENV,
        KEY_ENV: "test-key", "JPY_SESSION_NAME": notebook, "PATH": str(Path(sys.executable).parent) + os.pathsep
        + os.environ.get("PATH", ""),
    })
    env.update(env_extra or {})
    km = KernelManager(kernel_name="crystal", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_dir.parent)]))
    km.start_kernel(env=env, cwd=str(workspace))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return Kernel(km, KernelDriver(kc), server, home, workspace, notebook)


@pytest.fixture(scope="session")
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server


@pytest.fixture(scope="session")
def shared_kernel(llm_server, tmp_path_factory):
    kernel = start_kernel(tmp_path_factory.mktemp("kernel"), llm_server)
    yield kernel
    kernel.stop()


@pytest.fixture
def kernel(shared_kernel):
    shared_kernel.reset()
    return shared_kernel
