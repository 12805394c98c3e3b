"""A stock ``python3`` ipykernel (the venv's kernelspec) under jupyter_client, with
``%load_ext crystal_kernel`` and the loopback model server.

One kernel is shared by the tests of this folder; each test puts the session back to a
known state through :meth:`MagicKernel.reset`. The kernel tests' helpers are reused.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from crystal_kernel.jupyter.driver import KernelDriver
from crystal_kernel.testing.folder_shared import FolderShared
from crystal_kernel.testing.llm_server import LLMServer
from tests.jupyter.conftest import Kernel, ipc_kernel_manager, make_home


class MagicKernel(Kernel):
    def reset(self, approval: str = "default", mode: str = "work") -> None:
        self.server.clear()
        run = self.run(f"%%crystal\n/approval {approval}\n/mode {mode}")
        assert run.status == "ok", run.texts()

    def requests(self) -> int:
        return len(self.server.bodies("chat"))


def start_python_kernel(tmp: Path, server: LLMServer, env_extra: dict[str, str] | None = None, *,
                        home: Path | None = None, workspace: Path | None = None,
                        notebook: str | None = None) -> MagicKernel:
    home = home or make_home(tmp)
    workspace = workspace or tmp / "ws"
    workspace.mkdir(exist_ok=True)
    notebook = notebook or str(workspace / "analysis.ipynb")
    env = dict(os.environ)
    for var in ("ANTHROPIC_API_KEY", "CRYSTAL_ARGS", "CRYSTAL_APPROVAL", "CRYSTAL_MODEL"):
        env.pop(var, None)
    env.update({
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
        "CRYSTAL_BASE_URL": server.base_url, "OPENAI_API_KEY": "k", "JPY_SESSION_NAME": notebook,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    env.update(env_extra or {})
    # The venv's own stock kernelspec (python -m ipykernel_launcher), found first on PATH.
    km = ipc_kernel_manager(tmp, "python3", [Path(sys.prefix) / "share" / "jupyter" / "kernels"])
    km.start_kernel(env=env, cwd=str(workspace))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    kernel = MagicKernel(km, KernelDriver(kc), server, home, workspace, notebook)
    loaded = kernel.run("%load_ext crystal_kernel")
    assert loaded.status == "ok", loaded.texts() + [loaded.streams]
    return kernel


@pytest.fixture(scope="session")
def magic_server():
    with LLMServer(max_hang=20) as server:
        yield server


# The folder's shared kernel, stopped after the folder's last test (FolderShared).
_shared: FolderShared[MagicKernel] = FolderShared(Path(__file__).resolve().parent)


@pytest.fixture
def shared_python_kernel(magic_server, tmp_path_factory):
    return _shared.get(lambda: start_python_kernel(tmp_path_factory.mktemp("magics"), magic_server,
                                                   env_extra=_shared.env()), MagicKernel.stop)


def pytest_runtest_teardown(item, nextitem):
    _shared.teardown(nextitem)


@pytest.fixture
def kernel(shared_python_kernel):
    shared_python_kernel.reset()
    return shared_python_kernel
