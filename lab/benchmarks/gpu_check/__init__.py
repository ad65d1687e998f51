"""One GPU acceptance run: every GPU path checked and every GPU figure measured, in one command
(``python -m lab.benchmarks.gpu_check``); see main.py and docs/reports/GPU.md."""
