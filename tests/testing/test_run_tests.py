"""`make test` (crystal_kernel.testing.run_tests): progress as test names, and a run that
collects nothing fails. Run on a small folder of its own, not on the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def run(folder: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    code = ("import sys; from pathlib import Path; import crystal_kernel.testing.run_tests as r; "
            f"r.ROOT = Path({str(folder)!r}); sys.exit(r.main(['--rootdir', {str(folder)!r}]))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=cwd or folder)


def test_make_test_prints_each_test_name_as_it_runs(tmp_path):
    (tmp_path / "test_two.py").write_text("def test_first():\n    pass\n\ndef test_second():\n    pass\n")
    out = run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("test_two.py::test_first PASSED") for line in lines), out.stdout
    assert any(line.startswith("test_two.py::test_second PASSED") and line.endswith("[100%]") for line in lines)


def test_make_test_fails_when_nothing_was_collected(tmp_path):
    (tmp_path / "test_empty.py").write_text("# no tests here\n")
    out = run(tmp_path)
    assert out.returncode == 1
    assert "make test: pytest collected no tests; that is a failure." in out.stderr


def test_make_test_fails_on_a_ruff_finding_and_still_runs_the_suite(tmp_path):
    """A lint finding fails `make test`, and the tests still run and report."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_lint.py").write_text("import os\n\n\ndef test_one():\n    pass\n")
    out = run(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "F401" in out.stdout and "`os` imported but unused" in out.stdout
    assert any(line.startswith("tests/test_lint.py::test_one PASSED") for line in out.stdout.splitlines())
    assert "make test: the static checks found problems: ruff (see above)." in out.stderr


def test_make_test_holds_the_whole_package_to_mypy_strict(tmp_path):
    """`make test` runs mypy in strict mode (the project's own [tool.mypy]) on all
    of crystal_kernel: an unparameterised generic outside core/ and host/ fails it."""
    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "crystal_kernel").mkdir()
    (tmp_path / "crystal_kernel" / "__init__.py").write_text(
        '"""A package."""\n\n\ndef count(items: list) -> int:\n    return len(items)\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text("def test_only():\n    pass\n")
    elsewhere = tmp_path / "elsewhere"  # the runner itself is the real crystal_kernel's
    elsewhere.mkdir()
    out = run(tmp_path, cwd=elsewhere)
    assert out.returncode == 1, out.stdout + out.stderr
    assert 'crystal_kernel/__init__.py:4: error: Missing type arguments for generic type "list"' in out.stdout, out.stdout
    assert "mypy" in out.stderr.split("the static checks found problems:")[1], out.stderr


def test_make_demo_says_up_front_that_the_first_run_installs_for_minutes(tmp_path):
    """A first `make demo` (no .venv yet) says how long the install takes before it starts."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(["make", "-n", "-C", str(root), f"VENV={tmp_path / 'venv'}", "demo"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "about three minutes" in line)
    assert first < next(i for i, line in enumerate(lines) if "pip install" in line)
    assert "the first run takes about three minutes" in lines[first]


def test_make_test_prints_the_slowest_tests_and_its_wall_times(tmp_path):
    """The run ends with pytest's slowest tests and the wall time of each part."""
    (tmp_path / "test_one.py").write_text("def test_only():\n    pass\n")
    out = run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "slowest 30 durations" in out.stdout, out.stdout
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("make test: static checks ") and ", pytest " in last and last.endswith("s (wall time)."), last

