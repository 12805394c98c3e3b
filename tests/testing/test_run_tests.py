"""`make test` (crystal_kernel.testing.run_tests): progress as test names, and a run that
collects nothing fails. Run on a small folder of its own, not on the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def run(folder: Path, cwd: Path | None = None, workers: int = 2) -> subprocess.CompletedProcess:
    code = ("import sys; from pathlib import Path; import crystal_kernel.testing.run_tests as r; "
            f"r.ROOT = Path({str(folder)!r}); sys.exit(r.main(['--rootdir', {str(folder)!r}]))")
    # Not this test's own worker's variables (the suite itself may run on xdist workers).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["CRYSTAL_TEST_WORKERS"] = str(workers)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=cwd or folder, env=env)


def result_lines(out: subprocess.CompletedProcess) -> dict[str, str]:
    """Each test's result line as the parallel workers print it
    (``[gw0] [ 50%] PASSED test_two.py::test_first``), by test id."""
    found = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        match = re.match(r"\[gw\d+\] \[ *\d+%\] (PASSED|FAILED|ERROR|SKIPPED) (\S+)$", line)
        if match:
            found[match.group(2)] = line
    return found


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """One `make test` over a folder whose tests all pass, one of them marked ``serial``:
    the tests below read what it printed (each starts four pytest processes and the
    checks, ~4 s of CPU, so they share it)."""
    folder = tmp_path_factory.mktemp("passing")
    (folder / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["serial: alone"]\n')
    (folder / "test_two.py").write_text("def test_first():\n    pass\n\ndef test_second():\n    pass\n")
    (folder / "test_one.py").write_text("def test_only():\n    pass\n")
    (folder / "test_parts.py").write_text(
        "import os, time\nimport pytest\n\n"
        "def test_spread():\n    assert os.environ.get('PYTEST_XDIST_WORKER', '').startswith('gw')\n\n"
        "@pytest.mark.serial\ndef test_alone():\n    assert 'PYTEST_XDIST_WORKER' not in os.environ\n")
    return run(folder)


def test_make_test_prints_each_test_name_as_it_runs(passing_run):
    out = passing_run
    assert out.returncode == 0, out.stdout + out.stderr
    lines = result_lines(out)
    assert "PASSED" in lines["test_two.py::test_first"], out.stdout
    assert "PASSED" in lines["test_two.py::test_second"], out.stdout
    assert any("[100%]" in line for line in lines.values()), out.stdout


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
    assert "PASSED" in result_lines(out)["tests/test_lint.py::test_one"], out.stdout
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
    first = next(i for i, line in enumerate(lines) if "the first run takes" in line)
    assert first < next(i for i, line in enumerate(lines) if "pip install" in line)
    assert "the first run takes 3–5 minutes, depending on the machine's load" in lines[first]


def test_make_test_prints_the_slowest_tests_and_its_wall_times(passing_run):
    """The run ends with pytest's slowest tests and the wall time of each part."""
    out = passing_run
    assert out.returncode == 0, out.stdout + out.stderr
    assert "slowest 30 durations" in out.stdout, out.stdout
    assert "make test: parallel part " in out.stdout and " s (2 workers), serial part " in out.stdout, out.stdout
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("make test: static checks ") and ", pytest " in last and last.endswith("s (wall time)."), last


def test_make_test_runs_the_serial_tests_after_the_others_alone(passing_run):
    """Tests marked ``serial`` run in the second part, in the pytest process itself (no
    worker), after every other test; the others run on the parallel workers."""
    out = passing_run
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASSED" in result_lines(out)["test_parts.py::test_spread"], out.stdout
    serial_part = out.stdout.split("make test: the tests marked serial, one at a time ...")[1]
    assert "test_parts.py::test_alone PASSED" in serial_part, out.stdout
    assert "test_spread" not in serial_part, out.stdout


def test_the_serial_part_collects_only_the_files_the_parallel_part_listed(tmp_path):
    """When the parallel part's processes list the tests marked ``serial`` they collected
    (tests/conftest.py does, in the folder $CRYSTAL_TEST_SERIAL_LISTED names), the serial
    part collects only the files that hold them; the variable is gone before tests run."""
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["serial: alone"]\n')
    (tmp_path / "conftest.py").write_text(
        "import os\nfrom pathlib import Path\n\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    listed = os.environ.pop('CRYSTAL_TEST_SERIAL_LISTED', '')\n"
        "    if listed:\n"
        "        serial = [i.nodeid for i in items if i.get_closest_marker('serial')]\n"
        "        Path(listed, f'{os.getpid()}.txt').write_text('\\n'.join(serial))\n")
    (tmp_path / "test_parts.py").write_text(
        "import os\nimport pytest\n\n"
        "def test_spread():\n    assert 'CRYSTAL_TEST_SERIAL_LISTED' not in os.environ\n\n"
        "@pytest.mark.serial\ndef test_alone():\n    pass\n")
    (tmp_path / "test_other.py").write_text("def test_elsewhere():\n    pass\n")
    out = run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASSED" in result_lines(out)["test_parts.py::test_spread"], out.stdout
    assert "PASSED" in result_lines(out)["test_other.py::test_elsewhere"], out.stdout
    serial_part = out.stdout.split("make test: the tests marked serial, one at a time ...")[1]
    assert "test_parts.py::test_alone PASSED" in serial_part, out.stdout
    assert "collected 2 items / 1 deselected / 1 selected" in serial_part, out.stdout


def test_a_failure_in_either_part_fails_make_test(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["serial: alone"]\n')
    (tmp_path / "test_parts.py").write_text(
        "import pytest\n\ndef test_spread():\n    pass\n\n"
        "@pytest.mark.serial\ndef test_alone():\n    assert False, 'broken alone'\n")
    out = run(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED test_parts.py::test_alone" in out.stdout, out.stdout


def test_the_static_checks_run_beside_the_parallel_part_and_end_before_the_serial_part(tmp_path):
    """The checks start with the parallel part (a test there sees a check running; the
    check waits for it, 30 s at most) and are over before the serial part starts (its
    test sees the check ended); their output is printed between the two parts."""
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["serial: alone"]\n')
    (tmp_path / "marks").mkdir()
    (tmp_path / "test_beside.py").write_text(
        "import time\nfrom pathlib import Path\nimport pytest\n\n"
        "def test_spread():\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not Path('marks/check-started').exists() and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    assert Path('marks/check-started').exists() and not Path('marks/check-ended').exists()\n"
        "    Path('marks/seen').touch()\n\n"
        "@pytest.mark.serial\ndef test_alone():\n    assert Path('marks/check-ended').exists()\n")
    check = ("import sys, time; from pathlib import Path; marks = Path(sys.argv[1]); "
             "(marks / 'check-started').touch(); print('the slow check looked'); deadline = time.monotonic() + 30\n"
             "while not (marks / 'seen').exists() and time.monotonic() < deadline: time.sleep(0.05)\n"
             "(marks / 'check-ended').touch()")
    code = ("import sys; from pathlib import Path; import crystal_kernel.testing.run_tests as r; "
            f"r.ROOT = Path({str(tmp_path)!r}); "
            f"r.CHECKS = [('slow', [sys.executable, '-c', {check!r}], ['marks'], True)]; "
            f"sys.exit(r.main(['--rootdir', {str(tmp_path)!r}]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["CRYSTAL_TEST_WORKERS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASSED" in result_lines(out)["test_beside.py::test_spread"], out.stdout
    parallel, rest = out.stdout.split("make test: slow ...\n")
    assert "test_spread" in parallel and "test_alone" not in parallel, out.stdout
    assert rest.startswith("the slow check looked\n"), out.stdout
    assert "test_beside.py::test_alone PASSED" in rest.split("make test: the tests marked serial, one at a time ...")[1]
