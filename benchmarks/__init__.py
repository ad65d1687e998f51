"""Benchmark scripts: side-by-side ratios printed and written as JSON to benchmarks/results/.

Run one with ``python -m benchmarks.<name>`` from the repository root, all with
``python -m benchmarks.run_all``.
"""
