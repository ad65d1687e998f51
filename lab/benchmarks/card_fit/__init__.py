"""Which card fits, run instead of estimated: ``python -m lab.benchmarks.card_fit`` (run.py,
main.py)."""
