"""Helpers shared by the reliability tests (imported by name: conftest.py puts this
folder on sys.path, since the suite runs with --import-mode=importlib)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer

_spec = importlib.util.spec_from_file_location(
    "crystal_tests_jupyter_helpers", Path(__file__).resolve().parent.parent / "jupyter" / "conftest.py")
kernel_helpers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = kernel_helpers  # dataclasses look their module up by name
_spec.loader.exec_module(kernel_helpers)  # type: ignore[union-attr]


def session_documents(workspace: Path) -> list[dict[str, Any]]:
    """Every session in the workspace, read whole (a corrupt one fails the test)."""
    folder = workspace / ".crystal" / "sessions"
    store = SessionStore(workspace)
    stems = {p.stem for pattern in ("*.jsonl", "*.json") for p in folder.glob(pattern)}
    return [store.load(stem) for stem in sorted(stems)]


def user_prompts(doc: dict[str, Any]) -> list[str]:
    """The text the person typed in each turn of a session document, in order."""
    out = []
    for message in doc.get("history") or doc.get("transcript") or []:
        if message.get("role") != "user":
            continue
        texts = [p.get("text", "") for p in message.get("parts", []) if p.get("kind") == "text"]
        if texts:
            out.append("".join(texts))
    return out


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as exited)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def clear(server: LLMServer) -> None:
    server.clear()
