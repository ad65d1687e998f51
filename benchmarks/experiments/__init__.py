"""Finished one-off experiments and probes, kept so their figures can be reproduced.

Their conclusions live in the reports under docs/reports/ (each script names its report and
the result file it wrote). Run one with ``python -m benchmarks.experiments.<name>`` from the
repository root. They are not part of ``benchmarks.run_all``.
"""
