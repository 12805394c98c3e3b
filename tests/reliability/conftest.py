"""Reliability suite: faults, kills, full or read-only disks, fuzzed input, concurrent
writers and path escapes, against the real parts (a real kernel under jupyter_client,
real child processes, real files). Helpers live in reliability_support.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

# Test modules import reliability_support by name (--import-mode=importlib: no packages).
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server
