"""Benchmarks, run from the repository root as `python -m bench.<name>`; they write to bench/results/."""
