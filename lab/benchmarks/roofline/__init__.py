"""Seconds per step and per image on each emulated card, from a per-kernel roofline over the
kernels the pack's own code runs on it (``python -m lab.benchmarks.roofline``; method in
run.py and docs/reports/GPU.md, "Time per card")."""
