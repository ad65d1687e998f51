"""What the estimator can be asked for, each list from the code it measures, and the one check
that refuses anything else with a message naming the choices.

Layouts: lab/benchmarks/gpu_check's (speed.LAYOUTS: bf16, fp8 storage, blocks streamed, ComfyUI fp8
and int8, GGUF Q8_0 and Q4_K_M), built by its ``build_layout``. Sizes: per model shape (the 8B
shape at 512 and 1024 px; the tiny test shape at 64 and 128 px). Strategies: the labels of the
committed test-set results (compute.py ``strategy_results``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lab.benchmarks.gpu_check.speed import LAYOUTS

__all__ = ["BATCHES", "CACHES", "LAYOUTS", "SHAPES", "SIZES", "STORAGES", "check", "parse_list"]

SHAPES = ("8b", "tiny")
SIZES = {"8b": (512, 1024), "tiny": (64, 128)}  # px; the tiny grids are 4 x 4 and 8 x 8
BATCHES = (1, 4)
CACHES = ("none", "ml-cache")
STORAGES = ("meta", "cpu")  # cpu: real values (the tests' check of the accounting)


def check(name: str, values: Iterable[object], choices: Sequence[object]) -> list:
    """``values`` as a list if each is one of ``choices``; else ValueError naming ``name``, the
    values refused and every choice."""
    values = list(values)
    bad = [v for v in values if v not in choices]
    if bad or not values:
        shown = ", ".join(str(c) for c in choices)
        got = ", ".join(str(b) for b in bad) or "nothing"
        raise ValueError(f"{name}: {got} is not one of {shown}")
    return values


def parse_list(text: str, kind: type = str) -> list:
    """``"a,b"`` -> [a, b] converted by ``kind``; a value ``kind`` refuses stays a string (so
    ``check`` names it)."""
    out: list = []
    for part in (p.strip() for p in text.split(",")):
        try:
            out.append(kind(part))
        except ValueError:
            out.append(part)
    return out
