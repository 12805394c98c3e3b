"""Fixtures for the MCP tests: Home, workspace, marks folder, HTTP server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helpers module sits beside this file; make it importable whatever the import mode.
sys.path.insert(0, str(Path(__file__).parent))

from mcp_support import HttpServer  # noqa: E402


@pytest.fixture
def home(private_home: Path) -> Path:
    return private_home


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder


@pytest.fixture
def http_server(tmp_path: Path):
    server = HttpServer(tmp_path)
    server.start()
    yield server
    server.kill()
