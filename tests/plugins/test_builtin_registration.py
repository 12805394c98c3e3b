"""Built-in tools come through the project's own pluggy hook (``crystal_builtin_tools``),
registered by Crystal's parts themselves: a built-in that cannot be imported fails the
catalog loudly instead of silently leaving the agent without the tool (MODE-7: the
built-in names stay reserved), and the notebook tools exist only once the jupyter front
registered them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crystal_kernel import plugins
from crystal_kernel.tools.catalog import WORK_ORDER, CatalogOptions, build_catalog

BROKEN = """
import sys
sys.modules["crystal_kernel.tools.grep"] = None  # as if grep.py (or a dependency of it) were broken
from crystal_kernel.tools.catalog import CatalogOptions, build_catalog
print([t.name for t in build_catalog(CatalogOptions())])
"""


def test_a_built_in_that_cannot_be_imported_fails_loudly():
    out = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0, out.stdout  # never a catalog without grep
    assert "ModuleNotFoundError" in out.stderr and "crystal_kernel.tools.grep" in out.stderr


def test_a_session_with_a_broken_built_in_refuses_to_start(tmp_path):
    """The same through the front a person uses: `crystal run` stops with the import error."""
    code = ("import sys; sys.modules['crystal_kernel.tools.bash'] = None\n"
            "from crystal_kernel.cli import main\n"
            f"sys.exit(main(['run', '--workspace', {str(tmp_path)!r}, '--provider', 'replay', '/tools']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "CRYSTAL_HOME": str(tmp_path / "home")})
    assert out.returncode != 0
    assert "crystal_kernel.tools.bash" in out.stderr


@pytest.fixture
def fresh_manager():
    plugins.reset_plugin_manager()
    yield plugins.plugin_manager()
    plugins.reset_plugin_manager()


def test_built_ins_register_through_the_hook(fresh_manager):
    names = [t.name for t in build_catalog(CatalogOptions())]
    assert names[: len(WORK_ORDER) - 1] == [n for n in WORK_ORDER if n != "skill"]
    assert fresh_manager.get_plugin(plugins.BUILTIN_PREFIX + "builtin-tools") is not None
    assert plugins.third_party_plugins() == []  # `crystal plugins list` shows none of Crystal's parts


def test_notebook_tools_come_from_the_jupyter_front(fresh_manager):
    with pytest.raises(LookupError, match="'python' is not registered; the jupyter front"):
        build_catalog(CatalogOptions(notebook=True))
    from crystal_kernel.jupyter import notebook_plugin

    notebook_plugin.register()
    notebook_plugin.register()  # idempotent
    names = [t.name for t in build_catalog(CatalogOptions(notebook=True))]
    assert names[names.index("notebook_run") + 1:][:3] == ["python", "variables", "cell_output"]
    assert "python" not in [t.name for t in build_catalog(CatalogOptions(notebook=False))]


def test_plugins_list_shows_no_built_in(tmp_path):
    out = subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "plugins", "list", "--format", "json",
                          "--home", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["plugins"] == []
