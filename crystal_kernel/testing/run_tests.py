"""`make test`: the static checks, then the whole suite with pytest.

The checks (configured in pyproject.toml) run first and are short: ``ruff check`` on
crystal_kernel, tests and bench, ``mypy`` on crystal_kernel, and ``lint-imports``
(import-linter's layering contracts, docs/architecture.md). A finding fails the run, but
the suite still runs, so one report shows everything.

Each test's name and result is printed as it finishes (``-v``), with the share of the
suite done: the suite takes minutes, and a row of dots says nothing about where it is.
pytest's exit code 5 ("no tests collected") is turned into a failure with a clear line:
a run that tested nothing must never pass.

The run ends with pytest's 30 slowest tests (``--durations``) and one line with the wall
time of the static checks and of pytest, so a slow suite says where its time went
(docs/contributing.md).
"""

from __future__ import annotations

import subprocess
import sys
import time
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
]

#: How many of the slowest tests pytest lists at the end of the run.
SLOWEST_SHOWN = 30


def run_checks() -> list[str]:
    """Run every check whose folders exist under ROOT; the names of those that found something."""
    failed = []
    for name, command, folders, given in CHECKS:
        present = [f for f in folders if (ROOT / f).exists()]
        if not present:
            continue
        print(f"make test: {name} ...", flush=True)
        if subprocess.call([*command, *(present if given else [])], cwd=ROOT) != 0:
            failed.append(name)
    return failed


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    failed = run_checks()
    checked = time.monotonic()
    args = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
            f"--durations={SLOWEST_SHOWN}", *(argv or [])]
    code = subprocess.call(args, cwd=ROOT)
    print(f"make test: static checks {checked - started:.1f} s, pytest {time.monotonic() - checked:.1f} s "
          f"(wall time).", flush=True)
    if code == 5:
        print("make test: pytest collected no tests; that is a failure.", file=sys.stderr)
        code = 1
    if failed:
        print(f"make test: the static checks found problems: {', '.join(failed)} (see above).", file=sys.stderr)
        return code or 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
