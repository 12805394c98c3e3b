"""Test-wide guards: no network beyond loopback, and a private Home for every test.

The network guard patches socket connects in this process (child processes started by
tests are pointed at the loopback model server explicitly, and run with the same HOME).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]

# Child processes must find the venv's tools (crystal, rg, jupyter) first.
_bin = str(Path(sys.executable).parent)
if not os.environ.get("PATH", "").startswith(_bin):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")

for _var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "CRYSTAL_PROVIDER", "CRYSTAL_MODEL", "CRYSTAL_BASE_URL", "CRYSTAL_API_KEY_ENV", "CRYSTAL_APPROVAL"):
    os.environ.pop(_var, None)

# Topic naming (PH-11) sends one extra request after a session's first turn; tests that
# script model replies would see it take one. host/topic.py honours this switch; tests of
# topic naming turn it back on with monkeypatch.
os.environ["CRYSTAL_TOPIC_NAMING"] = "off"


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory, monkeypatch):
    """HOME and CRYSTAL_HOME point at a fresh temporary folder for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRYSTAL_HOME", str(home / ".crystal"))
    (home / ".crystal").mkdir()
    yield home / ".crystal"


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws
