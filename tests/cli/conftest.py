"""Fixtures of the command-line tests."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal

CRYSTAL = str(Path(sys.executable).parent / "crystal")
PROMPT = "›"  # the interactive prompt (capture-pane drops its trailing space)


class StartCrystal(Protocol):
    def __call__(self, server: LLMServer, *args: str, env_extra: dict[str, str] | None = None,
                 width: int = 120) -> TmuxTerminal: ...


@pytest.fixture
def terminal_for(workspace: Path) -> Iterator[StartCrystal]:
    """Start ``crystal --workspace WS ARGS`` in a tmux pane talking to ``server``; the pane
    prints ``EXIT=<status>`` when crystal ends."""
    opened: list[TmuxTerminal] = []

    def start(server: LLMServer, *args: str, env_extra: dict[str, str] | None = None,
              width: int = 120) -> TmuxTerminal:
        env = {**os.environ, "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
               "CRYSTAL_MODEL": "gpt-test", "OPENAI_API_KEY": "sk-test", **(env_extra or {})}
        line = shlex.join([CRYSTAL, "--workspace", str(workspace), *args])
        term = TmuxTerminal(f"{line}; echo EXIT=$?; sleep 120", env, width=width)
        opened.append(term)
        term.wait_for(PROMPT, timeout=90)
        return term

    yield start
    for term in opened:
        term.close()
