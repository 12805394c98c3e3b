"""`make bench`: run every bench/bench_*.py and print one table of ratios.

Each module's ``main()`` returns rows ``{"name", "ours", "reference", "unit", "ratio",
"target", "met"}``; ``met`` is recomputed here from ratio/ours and target so that it is
never typed in. Results go to bench/results.json. Benchmarks are measurements, not
tests: a missed target is reported, not failed.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def recompute_met(row: dict) -> dict:
    target = row.get("target")
    if isinstance(target, dict):  # {"ratio_max": 1.2} or {"ours_max": 0.05}
        ok = True
        if "ratio_max" in target:
            ok = ok and row.get("ratio") is not None and row["ratio"] <= target["ratio_max"]
        if "ours_max" in target:
            ok = ok and row.get("ours") is not None and row["ours"] <= target["ours_max"]
        row["met"] = ok
    return row


def main(argv: list[str]) -> int:
    only = set(argv)
    rows: list[dict] = []
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem
        if only and name not in only and name.removeprefix("bench_") not in only:
            continue
        print(f"== {name}", flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
            rows.extend(recompute_met(r) for r in module.main())
        except Exception:
            traceback.print_exc()
            rows.append({"name": name, "ours": None, "reference": None, "unit": "", "ratio": None,
                         "target": None, "met": False, "error": "benchmark failed"})
    print()
    print(f"{'figure':48} {'ours':>12} {'reference':>12} {'unit':>6} {'ratio':>7} {'target':>18} met")
    for r in rows:
        def fmt(v):
            return f"{v:.4g}" if isinstance(v, (int, float)) else str(v)
        print(f"{r['name'][:48]:48} {fmt(r.get('ours')):>12} {fmt(r.get('reference')):>12} {r.get('unit',''):>6} "
              f"{fmt(r.get('ratio')):>7} {json.dumps(r.get('target'))[:18]:>18} {'yes' if r.get('met') else 'NO'}")
    (HERE / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\nwrote {HERE / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
