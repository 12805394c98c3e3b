"""Fixtures for exec tool set tests: a Home (CRYSTAL_HOME points at it), a workspace,
a session and a ToolContext. See exec_support.py for the session stand-in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helpers module sits beside this file; make it importable whatever the import mode.
sys.path.insert(0, str(Path(__file__).parent))

from exec_support import StandInSession, make_ctx
from crystal_kernel.tools.base import ToolContext


@pytest.fixture
def home(private_home: Path) -> Path:
    """The test's Home (tests/conftest.py points CRYSTAL_HOME at it)."""
    return private_home


@pytest.fixture
def session(home: Path, workspace: Path) -> StandInSession:
    return StandInSession(workspace=workspace, home=home)


@pytest.fixture
def ctx(session: StandInSession) -> ToolContext:
    return make_ctx(session)
