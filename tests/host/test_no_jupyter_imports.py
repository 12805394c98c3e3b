"""DESIGN principle 1: the agent host (crystal_kernel minus crystal_kernel/jupyter) never
imports a Jupyter library. Checked two ways: statically over every module's imports, and
by importing every host module in a fresh interpreter and looking at sys.modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import crystal_kernel

PACKAGE = Path(crystal_kernel.__file__).parent
FORBIDDEN = ("IPython", "ipykernel", "ipywidgets", "jupyter_server", "jupyter_client", "jupyter_core",
             "nbformat", "nbclient", "traitlets", "comm")


def host_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "jupyter" not in p.relative_to(PACKAGE).parts]


def test_no_module_outside_jupyter_imports_a_jupyter_library():
    offenders = []
    for path in host_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.relative_to(PACKAGE)}: {name}")
    assert offenders == []


def test_importing_the_host_loads_no_jupyter_module():
    modules = []
    for path in host_modules():
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__main__" or parts[-1] == "__init__" and len(parts) == 1:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.append(".".join(parts))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r})\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
