"""Installed-like plugins for tests: each test writes a real module plus a
``<dist>.dist-info`` folder with METADATA and entry_points.txt into a temporary folder
on sys.path, so importlib.metadata discovers it through the ``crystal_kernel.plugins``
entry-point group exactly as for a pip-installed package. No mocks."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from crystal_kernel import plugins


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    plugins.reset_plugin_manager()
    before = set(sys.modules)
    yield folder
    plugins.reset_plugin_manager()
    for name in set(sys.modules) - before:
        if name.startswith("crystal_test_plugin"):
            del sys.modules[name]


@pytest.fixture
def install_plugin(site: Path) -> Callable[..., Path]:
    def install(dist: str, source: str, *, entry: str | None = None, module: str | None = None) -> Path:
        module = module or f"crystal_test_plugin_{dist}"
        (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[crystal_kernel.plugins]\n{dist} = {entry or module}\n")
        importlib.invalidate_caches()
        return site
    return install
