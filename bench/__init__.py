"""Benchmarks: each bench_*.py has main() -> list of rows; `python -m bench` prints them."""
