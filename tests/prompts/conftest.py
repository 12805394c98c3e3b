"""Fixtures for the prompt tests: real folders under the private Home and a workspace,
and real sessions on the scripted provider (no model is called by these tests)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel import plugins


def _write_folder(folder: Path, manifest: dict[str, Any] | str | None, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if manifest is not None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest, indent=2)
        (folder / "prompt.json").write_text(text, encoding="utf-8")
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def home(private_home: Path) -> Path:
    return private_home


@pytest.fixture
def mkset(home: Path) -> Callable[..., Path]:
    """mkset(name, manifest=None|dict|str, **files) -> folder in {home}/promptsets."""
    def make(name: str, manifest: dict[str, Any] | str | None = None, **files: str) -> Path:
        manifest = {"enabled": False} if manifest is None else manifest
        return _write_folder(home / "promptsets" / name, manifest, {k.replace("_", "."): v for k, v in files.items()})
    return make


@pytest.fixture
def mkatt(home: Path, workspace: Path) -> Callable[..., Path]:
    """mkatt(name, manifest, where="home"|"workspace", **files) -> attachment folder."""
    def make(name: str, manifest: dict[str, Any] | str | None = None, where: str = "home", **files: str) -> Path:
        root = home / "prompt-attachments" if where == "home" else workspace / ".crystal" / "prompt-attachments"
        manifest = {"enabled": False} if manifest is None else manifest
        return _write_folder(root / name, manifest, {k.replace("_", "."): v for k, v in files.items()})
    return make


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


@pytest.fixture
def make_session(home: Path, workspace: Path):
    """A real Session on the scripted provider; keyword flags become ProcessFlags."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.session import ProcessFlags, Session
    from crystal_kernel.testing.scripted import ScriptedProvider

    def make(ws: Path | None = None, **flags: Any) -> Session:
        config = load_config(home)
        return Session(workspace=ws or workspace, config=config,
                       provider=ScriptedProvider(name="openai", model="gpt-test"),
                       flags=ProcessFlags(**flags))
    return make


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to prove nothing was written)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def snap() -> Callable[[Path], dict[str, bytes]]:
    return snapshot
