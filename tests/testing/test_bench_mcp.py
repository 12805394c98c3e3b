"""bench/bench_mcp.py runs to its rows (not timed).

The module had crashed in a quiet `make bench` run on an attribute the session no longer
has, and no test ran it: this one runs it with the fewest rounds and checks that both
rows carry measured times.
"""

from __future__ import annotations

from bench import bench_mcp


def test_the_mcp_bench_measures_both_rows() -> None:
    rows = bench_mcp.main(call_rounds=2, start_rounds=1)
    assert [row["name"] for row in rows] == ["mcp call (echo, stdio)", "mcp first catalog (start + list)"]
    for row in rows:
        assert row["ours"] > 0 and row["reference"] > 0, row
