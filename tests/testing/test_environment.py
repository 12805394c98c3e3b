"""Crystal and Jupyter AI 3 share one environment (docs/acp.md
"Jupyter AI"). The test extra installs jupyter-ai, so after `make install` this venv is
what `pip install 'crystal-kernel[jupyter-ai]'` makes; nothing is installed here."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution, version

from packaging.requirements import Requirement
from packaging.version import Version


def test_pip_check_finds_every_requirement_met():
    """What pip reports as ResolutionImpossible when the two cannot share an environment
    shows here as a broken requirement (crystal-kernel's mcp>=2.3 against mcp 1.x)."""
    checked = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_jupyter_ai_3_and_crystal_use_one_mcp_and_acp_sdk():
    assert Version(version("jupyter-ai")).major == 3
    crystal = {Requirement(r).name: Requirement(r) for r in distribution("crystal-kernel").requires or []
               if "extra ==" not in r}
    # The SDK versions Jupyter AI's stack brought are the ones Crystal declares it works with.
    assert crystal["mcp"].specifier.contains(version("mcp")), (crystal["mcp"], version("mcp"))
    assert crystal["agent-client-protocol"].specifier.contains(version("agent-client-protocol"))


#: The server extensions the browser tests' labs use (tests/e2e/conftest.py): the lab and
#: Notebook 7 themselves, Crystal's, real-time collaboration, and what JupyterLab brings.
LAB_SERVER_EXTENSIONS = {
    "crystal_kernel.jupyter.server_ext", "jupyterlab", "notebook", "notebook_shim", "jupyter_lsp",
    "jupyter_server_fileid", "jupyter_server_terminals", "jupyter_server_ydoc",
}


def test_browser_test_labs_leave_out_every_other_server_extension_of_the_environment():
    """A lab of tests/e2e runs without Jupyter AI's server extensions unless its test asks
    for them (``running_lab(jupyter_ai=True)``): each other extension this environment
    enables is in JUPYTER_AI_SERVER_EXTENSIONS, which the labs turn off. One that was
    missing, jupyter_ai_litellm, cost every lab start ~10 s of CPU importing litellm and
    ~7 s of retries fetching a model price list from the network, on 2 cores."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    from tests.e2e.conftest import JUPYTER_AI_SERVER_EXTENSIONS

    enabled = {name for name, on in
               ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions().items() if on}
    assert "jupyter_ai_router" in enabled  # the environment this reads is the one the labs start in
    assert enabled - LAB_SERVER_EXTENSIONS <= set(JUPYTER_AI_SERVER_EXTENSIONS), (
        sorted(enabled - LAB_SERVER_EXTENSIONS - set(JUPYTER_AI_SERVER_EXTENSIONS)))
