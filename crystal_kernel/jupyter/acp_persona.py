"""Crystal in Jupyter AI's chat: an ACP persona for ``jupyter-ai-acp-client``.

Jupyter AI loads it through the ``jupyter_ai.personas`` entry point; nothing else
imports this module. The persona starts ``crystal acp`` (see docs/acp.md) with this
Python, or the command in ``CRYSTAL_ACP_COMMAND`` (split like a shell line) when
Crystal lives in another environment.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona
from jupyter_ai_persona_manager import PersonaDefaults


def agent_command() -> list[str]:
    """The argv that starts Crystal's ACP agent."""
    custom = os.environ.get("CRYSTAL_ACP_COMMAND", "").strip()
    if custom:
        return shlex.split(custom)
    from crystal_kernel.jupyter.kernelspec import module_argv

    # TRUST-2: the agent starts in the chat's folder; nothing there is imported.
    return [*module_argv(sys.executable, "crystal_kernel.cli"), "acp"]


class CrystalAcpPersona(BaseAcpPersona):
    """Crystal as a Jupyter AI persona: chats become Crystal sessions in the chat's folder."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, executable=agent_command(), **kwargs)

    @property
    def defaults(self) -> PersonaDefaults:
        return PersonaDefaults(
            name="Crystal",
            description="Crystal, the coding agent that lives in Jupyter, over the Agent Client Protocol.",
            avatar_path=str(Path(__file__).with_name("acp_avatar.svg")),
            system_prompt="unused",
        )
