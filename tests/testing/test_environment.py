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
