"""Fixtures for exec tool set tests: a Home (CRYSTAL_HOME points at it), a workspace,
a real Session and a ToolContext (exec_support.py keeps a minimal stand-in too)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helpers module sits beside this file; make it importable whatever the import mode.
sys.path.insert(0, str(Path(__file__).parent))

from exec_support import StandInSession, make_ctx

from crystal_kernel.core.config import load_config
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolContext


@pytest.fixture
def home(private_home: Path) -> Path:
    """The test's Home (tests/conftest.py points CRYSTAL_HOME at it)."""
    return private_home


@pytest.fixture
def session(home: Path, workspace: Path) -> Session:
    """The real Session (host/session.py) with an in-process scripted provider."""
    return Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]),
                   person_present=False, session_id="sess-test-1")


@pytest.fixture
def stand_in_session(home: Path, workspace: Path) -> StandInSession:
    """Only the attributes an exec tool reads: proves the tools need nothing more."""
    return StandInSession(workspace=workspace, home=home)


@pytest.fixture
def ctx(session: Session) -> ToolContext:
    return make_ctx(session)
