"""gpu_check measures a rolling batch's agreement with its items run alone on the device (the
share of items whose tokens equal their single run) instead of requiring equality on a GPU,
whose kernels follow the packed pass's row count; the CPU's float32 equality stays required."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lab.benchmarks.gpu_check.cases import ROLLING_ROUNDS, Case
from lab.benchmarks.gpu_check.correctness import agreement, run_case
from lab.benchmarks.gpu_check.render import _case_cell

TOKENS = torch.arange(4 * 6).reshape(4, 6)


def _result(tokens: torch.Tensor) -> SimpleNamespace:
    return SimpleNamespace(tokens=tokens, item_nfe=[3] * tokens.shape[0], steps=3)


def _rolling_case(flipped: bool, rounds: str) -> Case:
    """A batch of four whose item 2 differs from its single run (a flipped near tie) or not;
    the single runs give the reference tokens on either pipe."""
    batch = TOKENS.clone()
    if flipped:
        batch[2, 5] += 1
    singles = [lambda pipe, i=i: _result(TOKENS[i:i + 1]) for i in range(4)]
    return Case("rolling/2-of-4", lambda pipe: _result(batch if pipe == "device" else TOKENS),
                3, reference=lambda: _result(TOKENS), rounds=rounds, singles=singles)


def test_agreement_counts_the_items_equal_to_their_run_alone() -> None:
    batch = TOKENS.clone()
    batch[1, 0] = -1
    got = agreement(_result(batch), [_result(TOKENS[i:i + 1]) for i in range(4)])
    assert got == {"items": 4, "items_agree": 3, "agreement": 0.75}


def test_a_rolling_batch_on_a_gpu_reports_its_agreement_instead_of_failing() -> None:
    row = run_case(_rolling_case(True, ROLLING_ROUNDS), "cpu-ref", "device", torch.device("cpu"))
    assert row["check"] == "reported" and not row["tokens_equal"]
    assert (row["items"], row["items_agree"], row["agreement"]) == (4, 3, 0.75)
    assert "3 of 4 items as alone" in _case_cell(row)


@pytest.mark.parametrize("flipped", [False, True])
def test_on_the_cpu_equality_stays_required(flipped: bool) -> None:
    row = run_case(_rolling_case(flipped, ""), "cpu-ref", "device", torch.device("cpu"))
    assert row["check"] == ("failed" if flipped else "passed")
    assert row["agreement"] == (0.75 if flipped else 1.0)
