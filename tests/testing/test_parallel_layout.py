"""tests/parallel.py: the groups `make test`'s workers take and the tests its serial
part runs name real files and tests (a renamed test must not silently leave the list)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.parallel import (
    DOCS_COMMANDS,
    DOCS_PAGE_GROUPS,
    E2E_GROUPS,
    FIRST,
    FOLDER_GROUPS,
    OWN_LAB_GROUPS,
    SERIAL,
    group_of,
    is_serial,
    rank,
)

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


#: tests/e2e/conftest.py's fixtures that are, or stand on, the shared lab.
SHARED_LAB_FIXTURES = {"lab", "page", "shot"}


def uses_the_shared_lab(module: Path) -> bool:
    """Whether a browser-test module's tests or fixtures take one of tests/e2e/conftest.py's
    fixtures on the shared lab (a module that defines its own ``lab`` does not)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if any(f.name == "lab" for f in functions):
        return False
    tests_and_fixtures = [f for f in functions if f.name.startswith("test_")
                          or any("fixture" in ast.unparse(d) for d in f.decorator_list)]
    return any(SHARED_LAB_FIXTURES & {a.arg for a in f.args.args} for f in tests_and_fixtures)


def test_groups_keep_shared_kernels_and_browser_labs_on_one_worker():
    assert group_of("tests/jupyter/test_kernel_commands.py::test_a") == "tests/jupyter/"
    assert group_of("tests/jupyter/test_other.py::test_b[x]") == "tests/jupyter/"
    assert group_of("tests/magics/test_magic_interactive.py::test_c") == "tests/magics/"
    assert group_of("tests/e2e/test_lab.py::test_e") == group_of("tests/e2e/test_new.py::test_f") == "tests/e2e/"
    assert group_of("tests/e2e/test_forms.py::test_d") == "tests/e2e/forms"
    assert group_of("tests/tools/test_bash.py::test_g") == "tests/tools/test_bash.py"
    for folder in FOLDER_GROUPS:
        assert (ROOT / folder / "conftest.py").read_text(encoding="utf-8").count("FolderShared") > 0, folder


def test_every_browser_module_is_in_a_group_that_matches_its_lab():
    """A module on the shared lab is in a shared-lab group, one that starts its own lab in
    an own-lab group (a new module of either kind must be placed: tests/parallel.py)."""
    named = [m for modules in E2E_GROUPS.values() for m in modules]
    assert len(named) == len(set(named)), "a module is in two groups"
    for path in sorted((ROOT / "tests" / "e2e").glob("test_*.py")):
        module = str(path.relative_to(ROOT))
        group = group_of(f"{module}::test_x")
        assert uses_the_shared_lab(path) == (group not in OWN_LAB_GROUPS), (module, group)
    for module in named:
        assert (ROOT / module).is_file(), module
    assert set(OWN_LAB_GROUPS) <= set(E2E_GROUPS)
    assert {group_of(f"{m}::t") for m in named} | {"tests/e2e/"} <= set(FIRST), "every browser group goes first"


def test_the_long_groups_go_first_and_serial_is_by_prefix():
    assert rank("tests/docs/test_docs_commands.py::test_a[x]") == 0
    assert rank("tests/e2e/test_forms.py::test_a") < rank("tests/e2e/test_lab.py::test_b") < len(FIRST)
    assert rank("tests/tools/test_bash.py::test_a") == len(FIRST)
    for group in FIRST:
        assert group.endswith("/") or group in E2E_GROUPS or group in DOCS_PAGE_GROUPS or (ROOT / group).is_file(), group
    assert len(FIRST) == len(set(FIRST))
    assert is_serial("tests/security/test_cancel_every_tool.py::test_tools_without_a_slow_input_finish_at_once[skill]")
    assert not is_serial("tests/tools/test_bash.py::test_output_truncated")


def test_the_docs_pages_in_groups_of_their_own_are_pages_the_module_runs():
    """Each page named in DOCS_PAGE_GROUPS is a page whose commands the module runs (a
    renamed page must not silently go back to the module's group), in one group only, and
    its test goes to that group; the module's other tests stay in the module's group."""
    from tests.docs.docpages import PAGES, blocks

    named = [page for pages in DOCS_PAGE_GROUPS.values() for page in pages]
    assert len(named) == len(set(named)), "a page is in two groups"
    pages = {str(p.relative_to(ROOT)) for p in PAGES if any(b.lang in ("sh", "console") for b in blocks(p))}
    for group, members in DOCS_PAGE_GROUPS.items():
        assert group in FIRST, group
        for page in members:
            assert page in pages, page
            assert group_of(f"{DOCS_COMMANDS}::test_every_shell_command_in_the_page_runs[{page}]") == group
    assert group_of(f"{DOCS_COMMANDS}::test_every_shell_command_in_the_page_runs[README.md]") == DOCS_COMMANDS
    assert group_of(f"{DOCS_COMMANDS}::test_every_block_names_its_language") == DOCS_COMMANDS
