"""Re-check that the approval core's tests catch the listed hand mutants.

Usage (from the repository root, with the project's Python)::

    python tests/security/mutants/run_mutants.py            # every mutant in catalog.py
    python tests/security/mutants/run_mutants.py A29 F12    # some of them
    python tests/security/mutants/run_mutants.py --baseline # the named tests pass unmutated
    python tests/security/mutants/run_mutants.py --list

For each mutant it replaces the exact code text ``old`` by ``new`` in its file (matched
by text, never by line number: the file must hold ``old`` exactly once, else the mutant
is reported STALE), runs the tests that should catch it in one pytest process, and
restores the file byte for byte with its original modification time, whatever happens
(a ``finally``). The child pytest keeps its bytecode in a temporary folder of its own
(``PYTHONPYCACHEPREFIX``), never next to the sources, and each mutated file gets a
modification time of its own, so no cached ``.pyc`` of a mutant (same length, same
second) can stand in for another mutant or for the restored file.

A mutant is CAUGHT when pytest fails (exit 1), SURVIVED when it passes, and an ERROR on
any other exit (usage error, nothing collected). The exit code is 0 only when every
mutant that ran was caught. This is not part of ``make test`` (``make mutants`` runs it;
about 3 s a mutant). Never commit a mutated file: the script restores it, and refuses to
start when a target file already differs from ``git HEAD``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from catalog import MUTANTS, Mutant  # noqa: E402


def _dirty(files: set[str]) -> list[str]:
    """Target files that differ from git HEAD (a mutant left behind, or work in progress)."""
    out = subprocess.run(["git", "status", "--porcelain", "--", *sorted(files)], cwd=ROOT,
                         capture_output=True, text=True, check=False).stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def _pytest(tests: tuple[str, ...], cache: str) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *tests],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, (proc.stdout + proc.stderr)


def run_one(m: Mutant, cache: str, serial: int) -> tuple[str, str]:
    """(CAUGHT | SURVIVED | STALE | ERROR, detail) for one mutant."""
    path = ROOT / m.file
    original = path.read_bytes()
    stat = path.stat()
    text = original.decode("utf-8")
    count = text.count(m.old)
    if count != 1:
        return "STALE", f"the code text is found {count} times in {m.file}"
    try:
        path.write_text(text.replace(m.old, m.new, 1), encoding="utf-8")
        # A modification time no other version of this file had (pyc keys are whole seconds).
        mutated = stat.st_mtime_ns + (serial + 1) * 1_000_000_000
        os.utime(path, ns=(mutated, mutated))
        code, output = _pytest(m.tests, cache)
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    if code == 1:
        failed = [line.split(" ", 1)[1].split(" - ")[0] for line in output.splitlines()
                  if line.startswith(("FAILED ", "ERROR "))]
        summary = output.strip().splitlines()[-1] if output.strip() else ""
        return "CAUGHT", f"{summary.strip('= ')}: " + ", ".join(f.rsplit("::", 1)[-1] for f in failed)
    if code == 0:
        return "SURVIVED", "every named test passed with the change applied"
    return "ERROR", f"pytest exit {code}: " + output.strip().splitlines()[-1][:200] if output.strip() else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="mutant ids (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests")
    parser.add_argument("--baseline", action="store_true", help="run the named tests without mutation")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.ids or m.id in args.ids]
    unknown = set(args.ids) - {m.id for m in MUTANTS}
    if unknown:
        print(f"unknown mutant ids: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.id}  {m.file}  {m.what}\n      {' '.join(m.tests)}")
        return 0
    with tempfile.TemporaryDirectory(prefix="crystal-mutants-") as cache:
        if args.baseline:
            # Tests named after a mutant are (file, "-k", expression): one run selects them
            # all; the tests other mutants name (node ids) run together in a second one.
            named = [m for m in chosen if len(m.tests) == 3 and m.tests[1] == "-k"]
            runs = []
            if named:
                files = tuple(dict.fromkeys(m.tests[0] for m in named))
                runs.append((*files, "-k", " or ".join(f"({m.tests[2]})" for m in named)))
            nodes = tuple(dict.fromkeys(t for m in chosen if m not in named for t in m.tests))
            if nodes:
                runs.append(nodes)
            worst = 0
            for run in runs:
                code, output = _pytest(run, cache)
                print(output.strip().splitlines()[-1] if output.strip() else f"pytest exit {code}")
                worst = worst or code
            return worst
        dirty = _dirty({m.file for m in chosen})
        if dirty:
            print(f"refusing to mutate files that differ from git HEAD: {', '.join(dirty)}", file=sys.stderr)
            return 2
        results: dict[str, int] = {}
        for serial, m in enumerate(chosen):
            started = time.monotonic()
            status, detail = run_one(m, cache, serial)
            results[status] = results.get(status, 0) + 1
            print(f"{status:8} {m.id:4} {time.monotonic() - started:5.1f}s  {m.what}  [{detail}]", flush=True)
    print(", ".join(f"{k.lower()} {v}" for k, v in sorted(results.items())))
    return 0 if set(results) <= {"CAUGHT"} else 1


if __name__ == "__main__":
    sys.exit(main())
