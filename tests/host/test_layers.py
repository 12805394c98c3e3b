"""The layering of docs/architecture.md, checked by import-linter's `lint-imports` with the
contracts in pyproject.toml: core is a leaf, each layer imports only the layers below it
(so no import cycle runs between subpackages), and only the jupyter front imports Jupyter
libraries (DESIGN principle 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

import crystal_kernel

ROOT = Path(crystal_kernel.__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_every_contract_is_kept():
    out = _lint()
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in out.stdout


def test_every_subpackage_sits_in_a_layer():
    """A new subpackage cannot escape the layers (and so the no-cycle guarantee)."""
    layers = next(c for c in _contracts() if c["id"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    package = ROOT / "crystal_kernel"
    children = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    children |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert children - named == set()


def test_a_broken_contract_fails_the_check(tmp_path):
    """The check is real: a contract the code breaks (the host imports core) fails it."""
    config = tmp_path / "broken.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "crystal_kernel"\n\n'
        '[[tool.importlinter.contracts]]\nid = "broken"\nname = "host never imports core"\n'
        'type = "forbidden"\nsource_modules = ["crystal_kernel.host"]\nforbidden_modules = ["crystal_kernel.core"]\n',
        encoding="utf-8")
    out = _lint("--config", str(config))
    assert out.returncode != 0
    assert "BROKEN" in out.stdout
    assert "crystal_kernel.host" in out.stdout
