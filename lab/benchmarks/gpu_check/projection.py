"""The one place a GPU figure is projected rather than measured.

Random weights give a real model's cost per forward pass but not how many passes LADR makes
(random logits never clear a rescue threshold), so every projected GPU time is

    seconds = calls x ms per call,

with the calls measured elsewhere (nano's test-set mean NFE, lab/results/
quality_test.json; a calibration's calls per image) and the ms per call measured on the GPU
in the same kind of run (a replay that stops after that many calls, or a short calibration).
gpu_check's sections and the documents it writes call ``projected_seconds``; nothing else
projects.
"""

from __future__ import annotations

__all__ = ["projected_seconds"]


def projected_seconds(calls: float, ms_per_call: float) -> float:
    """``calls`` forward passes (sampler steps, or image-calls) at ``ms_per_call`` each, in s."""
    if calls < 0 or ms_per_call < 0:
        raise ValueError(f"calls and ms per call must be >= 0; got {calls}, {ms_per_call}")
    return calls * ms_per_call / 1e3
