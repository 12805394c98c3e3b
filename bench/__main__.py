"""`make bench`: run every bench/bench_*.py and print one table of ratios.

Each module's ``main()`` returns rows ``{"name", "ours", "reference", "unit", "ratio",
"target", "met"}``; ``met`` is recomputed here from ratio/ours and target so that it is
never typed in. A row may carry ``"skipped": "<reason>"`` (a reference that cannot be
installed or run here, for instance): it is shown with its reason and its ``met`` is
``null`` (neither met nor missed). A row may also carry ``"note"``: one short line
shown under the table. Results go to bench/results.json. Benchmarks are measurements,
not tests: a missed target is reported, not failed.

``python -m bench NAME...`` runs only those modules (``tokens`` or ``bench_tokens``);
``--json-only`` prints no table.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def recompute_met(row: dict[str, Any]) -> dict[str, Any]:
    """Set ``met`` from ``target``; a skipped row or a row without a target has ``met`` null."""
    if row.get("skipped"):
        row["met"] = None
        return row
    target = row.get("target")
    if isinstance(target, dict) and target:  # {"ratio_max": 1.2} and/or {"ours_max": 0.05}
        ok = True
        if "ratio_max" in target:
            ok = ok and isinstance(row.get("ratio"), (int, float)) and row["ratio"] <= target["ratio_max"]
        if "ours_max" in target:
            ok = ok and isinstance(row.get("ours"), (int, float)) and row["ours"] <= target["ours_max"]
        row["met"] = ok
    else:
        row["met"] = None
    return row


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, (int, float)):
        return f"{value:.4g}"
    return str(value)


def _target_text(target: Any) -> str:
    if not isinstance(target, dict) or not target:
        return "-"
    parts = []
    if "ratio_max" in target:
        parts.append(f"ratio<={_fmt(target['ratio_max'])}")
    if "ours_max" in target:
        parts.append(f"ours<={_fmt(target['ours_max'])}")
    return " ".join(parts)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'figure':56} {'ours':>10} {'reference':>10} {'unit':>6} {'ratio':>7} {'target':>18} met")
    notes: list[str] = []
    for r in rows:
        met = r.get("met")
        if r.get("skipped"):
            shown = "skip"
            notes.append(f"{r['name']}: skipped: {r['skipped']}")
        else:
            shown = "-" if met is None else ("yes" if met else "NO")
        if r.get("note"):
            notes.append(f"{r['name']}: {r['note']}")
        print(f"{r['name'][:56]:56} {_fmt(r.get('ours')):>10} {_fmt(r.get('reference')):>10} "
              f"{str(r.get('unit', ''))[:6]:>6} {_fmt(r.get('ratio')):>7} {_target_text(r.get('target'))[:18]:>18} "
              f"{shown}")
    if notes:
        print()
        for line in notes:
            print(f"  * {line}")


def main(argv: list[str]) -> int:
    quiet = "--json-only" in argv
    only = {a for a in argv if not a.startswith("--")}
    rows: list[dict[str, Any]] = []
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem
        if only and name not in only and name.removeprefix("bench_") not in only:
            continue
        print(f"== {name}", flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
            rows.extend(recompute_met(dict(r, module=name)) for r in module.main())
        except Exception as exc:
            traceback.print_exc()
            rows.append({"name": name, "module": name, "ours": None, "reference": None, "unit": "", "ratio": None,
                         "target": None, "met": False,
                         "error": f"benchmark failed: {type(exc).__name__}: {exc}"[:300]})
    if not quiet:
        print()
        print_table(rows)
    out = HERE / "results.json"
    if only and out.exists():
        # Running a few modules refreshes their rows and keeps the others' last figures.
        try:
            previous = json.loads(out.read_text(encoding="utf-8"))
        except ValueError:
            previous = []
        ran = {f"bench_{m.removeprefix('bench_')}" for m in only}
        kept = [r for r in previous if isinstance(r, dict) and r.get("module") not in ran]
        rows = kept + rows
    (out).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
