"""Built-in file tools on a generated tree of 50,000 files.

Rows:
- grep: the grep tool (ripgrep under its read-only sandbox and supervisor, parsing,
  sorting, formatting, notebooks found in the same walk) against the `rg` binary run
  directly with the same search. Target: within 1.3x.
- glob: the glob tool (`rg --files`, glob filter, stat, newest-first sort) for `**/*.py`.
  Reference: `rg --files` with the filter the tool gives it (a file type, which obeys
  .gitignore). Target: within 2x, and under 1 s. Reported beside it: against
  `rg --files --glob '**/*.py'` (overrides .gitignore for the files it matches) and
  against `rg --files --sortr modified` (rg's own newest-first listing).
- search first build: indexing the whole tree from nothing. Reference: one `rg` pass for
  the query words over the tree. Target: under 60 s.
- search warm query: a query on the built, unchanged index. Reference: `rg` for the same
  words. Target: under 50 ms.
- search warm query on the most common named word (in most files): reported; BM25 cost
  grows with the number of matching files.
- search freshness check: a forced up-to-date check of the unchanged tree, as it runs
  once folder watches are set up (tools/_watch.py). Target: under 100 ms.
- search full check: the same check listing and stating every file (what runs without
  inotify, and every 30 s with it); reported.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools._index import SearchIndex
from crystal_kernel.tools._walk import RG_BASE_FLAGS, rg_binary
from crystal_kernel.tools.catalog import load_builtin

FILES = 50_000
PER_DIR = 200
RUNS = 7
# Named words the queries use, placed at different ranks of a Zipf-distributed vocabulary
# of 5,000 words, so word frequencies look like a code base's rather than every file
# holding every word.
NAMED = ("session store request handler config parse token stream buffer index query result "
         "client server retry backoff render widget kernel notebook cell output image model").split()
VOCABULARY = 5000


def vocabulary() -> list[str]:
    words = [f"w{i:04d}" for i in range(VOCABULARY)]
    for k, word in enumerate(NAMED):
        words[5 + k * 150] = word  # ranks 5, 155, 305, ... 3755
    return words


def generate(root: Path) -> None:
    rng = random.Random(7)
    words = vocabulary()
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    (root / ".gitignore").write_text("generated_ignored/\n*.tmp\n")
    for i in range(FILES):
        folder = root / f"pkg{i // PER_DIR:03d}" / f"mod{(i // 20) % 10}"
        if i % 20 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        ext = (".py", ".ts", ".md", ".txt")[i % 4]
        count = rng.randint(10, 40)
        picked = rng.choices(words, weights, k=count * 5)
        lines = []
        for j in range(count):
            w = picked[j * 5 : j * 5 + 5]
            lines.append(f"def {w[0]}_{w[1]}_{j}(): return '{' '.join(w[2:])}'")
        if i % 97 == 0:
            lines.append("raise NeedleError('connection reset by peer')")
        (folder / f"file_{i}{ext}").write_text("\n".join(lines) + "\n")


def best(fn, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def paired(ours_fn, ref_fn, runs: int = RUNS) -> tuple[float, float]:
    """Best of ``runs`` for both, alternating, so load from elsewhere hits both alike."""
    ours, ref = [], []
    for _ in range(runs):
        ref.append(best(ref_fn, 1))
        ours.append(best(ours_fn, 1))
    return min(ours), min(ref)


def row(name, ours, reference, unit, target) -> dict:
    ratio = round(ours / reference, 3) if reference else None
    met = True
    if "ratio_max" in target:
        met = met and ratio is not None and ratio <= target["ratio_max"]
    if "ours_max" in target:
        met = met and ours <= target["ours_max"]
    out = {"name": name, "ours": round(ours, 4), "reference": round(reference, 4) if reference else None,
           "unit": unit, "ratio": ratio, "target": target, "met": met}
    print(f"{name:40} ours={out['ours']:<10} ref={out['reference']!s:<10} {unit:3} ratio={ratio} "
          f"target={target} met={met}", flush=True)
    return out


def main() -> list[dict]:
    rg = rg_binary()
    if not rg:
        raise RuntimeError("the rg binary (ripgrep package) is needed for the reference")
    tmp = Path(tempfile.mkdtemp(prefix="crystal-bench-tools-"))
    rows: list[dict] = []
    try:
        root = tmp / "ws"
        root.mkdir()
        home = tmp / "home"
        home.mkdir()
        start = time.perf_counter()
        generate(root)
        print(f"generated {FILES} files in {time.perf_counter() - start:.1f} s", flush=True)
        session = Session(workspace=root, config=Config(home=home), provider=ScriptedProvider(),
                          person_present=False)
        ctx = session.tool_context(NoPerson())
        loop = asyncio.new_event_loop()

        def tool(name: str, **arguments):
            t = load_builtin(name)
            result = loop.run_until_complete(t.run(t.parse(arguments), ctx))
            if not result.ok:
                raise RuntimeError(f"{name} failed: {result.text[:200]}")
            return result

        # Warm the page cache for both sides alike.
        subprocess.run([rg, "-c", "x", str(root)], capture_output=True)

        for label, pattern in (("grep, 50k files", r"NeedleError\('connection"),
                               ("grep, many matches, 50k files", r"return '\w+ session")):
            argv = [rg, *RG_BASE_FLAGS, "--line-number", "--with-filename", "--no-heading", "-e", pattern,
                    "--", str(root)]
            ours, ref = paired(lambda pattern=pattern: tool("grep", pattern=pattern),
                               lambda argv=argv: subprocess.run(argv, capture_output=True, check=True))
            rows.append(row(label, ours, ref, "s", {"ratio_max": 1.3}))
            if not rows[-1]["met"]:
                # One rg walk now (the notebooks come from the search's own listing), in
                # the host's session on both sandbox mechanisms.
                rows[-1]["note"] = ("one rg run; past the 5,000 lines kept, each output line is counted for its file "
                                    "in Python (the host's reader thread beside rg's on two cores)"
                                    if "many" in label else
                                    "on top of the same rg run: the forked supervisor's hand-offs, the sandbox's "
                                    "server, and parsing")

        # The reference lists the same files the same way (docs/benchmarks.md): rg's own listing with
        # the filter the tool gives it, a file type, which keeps the ignore files in force.
        # `--glob '**/*.py'` (the reference until then) overrides them: rg then skips
        # matching each file against .gitignore, less work than any listing that obeys it
        # (in the rows below, for comparison). Both print the 12,500 matches.
        typed = [rg, *RG_BASE_FLAGS, "--files", "--null", "--type-add", "crystalsuffix:*.py", "--type", "crystalsuffix"]
        refs = {"typed": typed, "glob": [rg, *RG_BASE_FLAGS, "--files", "--glob", "**/*.py", str(root)],
                "sorted": [*typed, "--sortr", "modified"]}
        times: dict[str, list[float]] = {"ours": [], **{k: [] for k in refs}}
        for _ in range(RUNS):  # alternating, as paired() does
            for key, argv in refs.items():
                times[key].append(best(lambda argv=argv: subprocess.run(argv, cwd=root, capture_output=True,
                                                                        check=True), 1))
            times["ours"].append(best(lambda: tool("glob", pattern="**/*.py"), 1))
        ours = min(times["ours"])
        rows.append(row("glob **/*.py, 50k files", ours, min(times["typed"]), "s", {"ratio_max": 2.0, "ours_max": 1.0}))
        rows.append(row("glob vs rg --files --glob (overrides .gitignore)", ours, min(times["glob"]), "s", {}))
        rows.append(row("glob vs rg --files --sortr modified (sorted too)", ours, min(times["sorted"]), "s", {}))
        ref = min(times["typed"])

        query = "retry backoff connection reset"
        rg_query = ["-e", "retry", "-e", "backoff", "-e", "connection", "-e", "reset"]
        ref_scan = best(lambda: subprocess.run([rg, *RG_BASE_FLAGS, "-l", *rg_query, str(root)],
                                               capture_output=True), runs=3)
        index = SearchIndex(root)
        start = time.perf_counter()
        index.refresh(force=True)
        build = time.perf_counter() - start
        rows.append(row("search first index build, 50k files", build, ref_scan, "s", {"ours_max": 60.0}))

        tool("search", query=query)  # the tool's own index object; refreshes once
        ours = best(lambda: tool("search", query=query), runs=10)
        rows.append(row("search warm query", ours * 1000, ref_scan * 1000, "ms", {"ours_max": 50.0}))
        # Worst case for BM25: the most frequent named word, in most files.
        common = NAMED[0]
        ours = best(lambda: tool("search", query=common), runs=10)
        rows.append(row(f"search warm query, '{common}' in most files", ours * 1000, ref_scan * 1000, "ms", {}))

        index2 = SearchIndex(root)
        index2.refresh(force=True)  # the first full check sets up the folder watches,
        index2.refresh(force=True)  # the second covers the folders they added
        check = best(lambda: index2.refresh(force=True), runs=5)
        rows.append(row("search freshness check, unchanged tree", check * 1000, ref * 1000, "ms",
                        {"ours_max": 100.0}))
        if index2.watch is None:
            rows[-1]["note"] = "no inotify here: every check lists and stats the tree"

        def full_check() -> None:
            index2.full_due = True  # what runs without watches, or every 30 s with them
            index2.refresh(force=True)

        check = best(full_check, runs=3)
        rows.append(row("search full check (list + stat), unchanged tree", check * 1000, ref * 1000, "ms", {}))
        index.close()
        index2.close()
        loop.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    main()
