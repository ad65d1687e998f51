"""Speed, memory and GPU scripts: side-by-side ratios printed and written as JSON to
lab/results/. Run one with ``python -m lab.benchmarks.<name>`` from the repository root, the CPU
set with ``python -m lab.benchmarks.run_all``, every GPU check with
``python -m lab.benchmarks.gpu_check``.
"""
