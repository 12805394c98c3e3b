"""`make test`: the static checks, then the whole suite with pytest.

The checks (configured in pyproject.toml) are short: ``ruff check`` on crystal_kernel,
tests and bench, ``mypy`` on crystal_kernel, and ``lint-imports`` (import-linter's
layering contracts, docs/architecture.md). They run one after the other beside the
parallel part, which starts at once: each is a single process, and alone they left one
of two cores idle for half a minute. Their output is held and printed when the parallel
part has ended, and they are done before the serial part starts, so that part still has
the machine to itself. A finding fails the run, but the suite still runs, so one report
shows everything.

The suite runs in two parts (docs/contributing.md). The parallel part spreads every
test not marked ``serial`` over pytest-xdist workers, more than the cores since most
tests wait on child processes and I/O; each worker takes whole groups (a module, a
folder that shares a kernel, the browser tests), as tests/parallel.py lays out. Then the
serial part runs the tests marked ``serial`` in one process, alone on the machine: they
assert wall-clock bounds that the parallel part's load would break.
``CRYSTAL_TEST_WORKERS`` sets the number of workers (0: the parallel part runs in one
process too).

Each test's name and result is printed as it finishes (``-v``), with the share of the
part done: the suite takes minutes, and a row of dots says nothing about where it is.
pytest's exit code 5 ("no tests collected") of both parts is turned into a failure with
a clear line: a run that tested nothing must never pass (a part with nothing to run,
such as no test marked ``serial``, is fine).

pytest rewrites the ``assert`` statements of each test module, conftest and pytest plugin
it imports, and keeps the result in ``__pycache__`` only when the process may write
bytecode; this project's machines set ``PYTHONDONTWRITEBYTECODE``. So that each pytest
process (six workers, the serial part, each pytest a test starts) does not rewrite and
compile them all again (~9 s of CPU for the suite's modules, ~1.4 s for the plugins),
the runner writes the rewritten test modules and conftests into pytest's cache before
the parallel part starts (:func:`cache_rewritten_tests`; the workers start together and
would each rewrite every module themselves), and each pytest process it starts may
write bytecode (the plugins are cached by the first). pytest checks a cached file
against the hash of its source and against its own version before it uses it. Only
those pytest processes change: the environment stays as given, so a kernel, a lab or a
`crystal` command that a test starts runs as it always does.

Each part ends with pytest's 30 slowest tests (``--durations``), and the run with the
wall time of each part and one line with the wall time of the static checks and of
pytest, so a slow suite says where its time went.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (what, command, the folders it reads, whether they are given on its command line) for
#: each static check; each reads its settings
#: from pyproject.toml. A check runs only when one of its folders exists under ROOT.
CHECKS: list[tuple[str, list[str], list[str], bool]] = [
    ("ruff", [sys.executable, "-m", "ruff", "check"], ["crystal_kernel", "tests", "bench"], True),
    # lint-imports reads the contracts in pyproject.toml: the folder is only looked for.
    # mypy reads its settings (and the folder to check) from pyproject.toml.
    ("mypy", [sys.executable, "-m", "mypy"], ["crystal_kernel"], False),
    ("lint-imports", [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], ["crystal_kernel"], False),
    # pyright (npm, pinned in the Makefile's build/pyright) reads [tool.pyright] in pyproject.toml.
    ("pyright", [str(ROOT / "build" / "pyright" / "node_modules" / ".bin" / "pyright")], ["crystal_kernel"], False),
]

#: How each part starts pytest: as ``python -m pytest``, only allowed to write bytecode
#: (the module docstring says why); sys.path starts with the working folder, as with -m.
PYTEST = ("import os, sys; sys.path[0] = os.getcwd(); sys.dont_write_bytecode = False; "
          "import pytest; sys.exit(pytest.console_main())")
#: The variable that names a folder where each pytest process of the parallel part may
#: list the ids of the tests marked ``serial`` it collected (tests/conftest.py does).
SERIAL_LISTED = "CRYSTAL_TEST_SERIAL_LISTED"
#: pytest's options whose value is the next argument and is not a test path.
VALUED = ("--rootdir", "-k", "-m", "-p", "-c", "-o", "--override-ini", "--basetemp", "--confcutdir")
#: The files pytest rewrites when it imports them: its default ``python_files`` and conftests.
REWRITTEN = ("test_*.py", "*_test.py", "conftest.py")
#: How many of the slowest tests pytest lists at the end of each part.
SLOWEST_SHOWN = 30
#: pytest's exit code when it collected no test.
NO_TESTS = 5


def worker_count() -> int:
    """The parallel part's workers: ``CRYSTAL_TEST_WORKERS``, else three per core (most
    tests wait on child processes and I/O), at least 4 and at most 8."""
    given = os.environ.get("CRYSTAL_TEST_WORKERS", "").strip()
    if given:
        return max(0, int(given))
    return min(8, max(4, 3 * (os.cpu_count() or 1)))


@dataclass
class Checks:
    """What the static checks printed, which of them found something, and their wall time."""

    output: str = ""
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_checks(into: Checks) -> None:
    """Run every check whose folders exist under ROOT, one after the other, into ``into``:
    their output (held, not printed) and the names of those that found something."""
    started = time.monotonic()
    for name, command, folders, given in CHECKS:
        present = [f for f in folders if (ROOT / f).exists()]
        if not present:
            continue
        try:
            out = subprocess.run([*command, *(present if given else [])], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace")
        except FileNotFoundError:
            into.output += f"make test: {name} ...\n{command[0]} is not installed: `make test` installs it.\n"
            into.failed.append(name)
            continue
        into.output += f"make test: {name} ...\n{out.stdout}"
        if out.returncode != 0:
            into.failed.append(name)
    into.seconds = time.monotonic() - started


def test_folders(argv: list[str]) -> list[Path]:
    """The folders and files the run collects, as far as the cache needs them: those
    named in ``argv``, else ROOT/tests (the suite's ``testpaths``), else ROOT."""
    named = [ROOT / arg.split("::", 1)[0] for arg in argv if not arg.startswith("-")]
    named = [path for path in named if path.exists()]
    if named:
        return named
    return [ROOT / "tests"] if (ROOT / "tests").is_dir() else [ROOT]


def cache_rewritten_tests(folders: list[Path]) -> None:
    """Write the rewritten form of each test module and conftest under ``folders`` where
    pytest's import hook looks for it first, unless an up-to-date one is there."""
    try:
        import importlib.util

        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _write_pyc_fp, get_cache_dir, rewrite_asserts
    except ImportError:  # another pytest: each process rewrites what it imports, as before
        return
    files: list[Path] = []
    for top in folders:
        if top.is_file():
            files.append(top)
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")]
            files.extend(Path(folder, n) for n in names if any(fnmatch(n, p) for p in REWRITTEN))
    for path in files:
        cache = get_cache_dir(path)
        pyc = cache / (path.name[:-3] + PYC_TAIL)
        if _read_pyc(path, pyc) is not None:
            continue
        try:
            source = path.read_bytes()
            tree = ast.parse(source, filename=str(path))
            rewrite_asserts(tree, source, str(path))
            code = compile(tree, str(path), "exec", dont_inherit=True)
            cache.mkdir(exist_ok=True)
            partial = cache / f"{pyc.name}.{os.getpid()}"
            with open(partial, "wb") as out:
                _write_pyc_fp(out, importlib.util.source_hash(source), code)
            os.replace(partial, pyc)
        except (OSError, SyntaxError, ValueError):  # pytest's own import reports it
            continue
        except (TypeError, AttributeError):  # another pytest's internals: it rewrites them itself
            return


def serial_files(folder: Path, argv: list[str]) -> list[str]:
    """The files that hold the tests marked ``serial``, as the parallel part's processes
    listed them in ``folder`` (one file each of test ids; tests/conftest.py writes them),
    in the order found; none when the run names paths of its own, or nothing was listed."""
    values = {i + 1 for i, arg in enumerate(argv) if arg in VALUED}
    if any((ROOT / arg.split("::", 1)[0]).exists() for i, arg in enumerate(argv)
           if not arg.startswith("-") and i not in values):
        return []
    files: dict[str, None] = {}
    for listing in sorted(folder.glob("*.txt")):
        for nodeid in listing.read_text(encoding="utf-8").splitlines():
            if nodeid:
                files[nodeid.split("::", 1)[0]] = None
    return list(files)


def run_pytest(what: str, options: list[str], argv: list[str], env: dict[str, str] | None = None) -> tuple[int, float]:
    """One part of the suite: pytest's exit code and the part's wall time."""
    print(f"make test: {what} ...", flush=True)
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-c", PYTEST, "-v", "-p", "no:cacheprovider",
                            f"--durations={SLOWEST_SHOWN}", *options, *argv], cwd=ROOT, env=env)
    return code, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    checks = Checks()
    checking = threading.Thread(target=run_checks, args=(checks,), name="static checks")
    print(f"make test: the static checks ({', '.join(name for name, *_ in CHECKS)}) run beside the parallel part; "
          "their output follows it.", flush=True)
    checking.start()
    workers = worker_count()
    spread = ["-n", str(workers)] if workers else []
    if workers:
        cache_rewritten_tests(test_folders(argv or []))
    with tempfile.TemporaryDirectory(prefix="crystal-serial-") as listed:
        try:
            parallel, parallel_time = run_pytest(
                f"the tests not marked serial, on {workers or 'no'} parallel workers", [*spread, "-m", "not serial"],
                argv or [], env={**os.environ, SERIAL_LISTED: listed})
        finally:
            checking.join()
            print(checks.output, end="", flush=True)
        # The serial part collects only the files that hold its tests, when the parallel
        # part's collection listed them (a whole collection is ~9 s of the serial part's
        # time, alone on the machine); otherwise every file, and -m picks.
        serial, serial_time = run_pytest("the tests marked serial, one at a time", ["-m", "serial"],
                                         (argv or []) + serial_files(Path(listed), argv or []))
    failed = checks.failed
    print(f"make test: parallel part {parallel_time:.1f} s ({workers} workers), serial part {serial_time:.1f} s.",
          flush=True)
    print(f"make test: static checks {checks.seconds:.1f} s (beside the parallel part), "
          f"pytest {parallel_time + serial_time:.1f} s, in all {time.monotonic() - started:.1f} s (wall time).",
          flush=True)
    if parallel == serial == NO_TESTS:
        print("make test: pytest collected no tests; that is a failure.", file=sys.stderr)
        code = 1
    else:
        code = next((c for c in (parallel, serial) if c not in (0, NO_TESTS)), 0)
    if failed:
        print(f"make test: the static checks found problems: {', '.join(failed)} (see above).", file=sys.stderr)
        return code or 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
