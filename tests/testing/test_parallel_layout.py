"""tests/parallel.py: the groups `make test`'s workers take and the tests its serial
part runs name real files and tests (a renamed test must not silently leave the list)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.parallel import FIRST, FOLDER_GROUPS, OWN_LAB_MODULES, SERIAL, group_of, is_serial, rank

ROOT = Path(__file__).resolve().parents[2]


def test_every_serial_entry_names_an_existing_test():
    for entry in SERIAL:
        path, _, name = entry.partition("::")
        file = ROOT / path
        assert file.is_file(), entry
        if name:
            tests = {node.name for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}
            assert any(t.startswith(name) for t in tests), f"{entry}: no such test in {path}"


def test_groups_keep_shared_kernels_and_browser_labs_on_one_worker():
    assert group_of("tests/jupyter/test_kernel_commands.py::test_a") == "tests/jupyter/"
    assert group_of("tests/jupyter/test_other.py::test_b[x]") == "tests/jupyter/"
    assert group_of("tests/magics/test_magic_interactive.py::test_c") == "tests/magics/"
    assert group_of("tests/e2e/test_forms.py::test_d") == group_of("tests/e2e/test_lab.py::test_e") == "tests/e2e/"
    assert {group_of(f"{m}::test_f") for m in OWN_LAB_MODULES} == {"tests/e2e/own-lab"}
    assert group_of("tests/tools/test_bash.py::test_g") == "tests/tools/test_bash.py"
    for folder in FOLDER_GROUPS:
        assert (ROOT / folder / "conftest.py").read_text(encoding="utf-8").count("FolderShared") > 0, folder
    for module in OWN_LAB_MODULES:
        assert "running_lab" in (ROOT / module).read_text(encoding="utf-8"), module


def test_the_long_groups_go_first_and_serial_is_by_prefix():
    assert rank("tests/e2e/test_forms.py::test_a") == 0
    assert rank("tests/tools/test_bash.py::test_a") == len(FIRST)
    for group in FIRST:
        assert group.endswith("/") or group == "tests/e2e/own-lab" or (ROOT / group).is_file(), group
    assert is_serial("tests/security/test_cancel_every_tool.py::test_tools_without_a_slow_input_finish_at_once[skill]")
    assert not is_serial("tests/tools/test_bash.py::test_output_truncated")
