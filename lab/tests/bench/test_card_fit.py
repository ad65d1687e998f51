"""Which card fits, run on the emulated cards (lab/benchmarks/card_fit): a representative
small set of the committed sweep is run again and must give the committed answers and peaks;
every disagreement with the estimate the results file records is one, and only those; bad
choices are refused with the choices named."""

from __future__ import annotations

import pytest

from lab.benchmarks.card_fit import main as card_fit
from lab.benchmarks.card_fit.compare import _estimate, estimated_fit
from lab.benchmarks.card_fit.run import fit_case
from lab.benchmarks.card_fit.table import load

FIT = load()
# CI's representative set (the whole sweep: python -m lab.benchmarks.card_fit): the 8 GB sm 7.5
# card without bf16 where the run and the estimate disagree (Q4_K_M runs out while quantising),
# bf16 on the 24 GB sm 8.9 card, fp8 storage on the 80 GB sm 9.0 card (its fallback reported)
REPRESENTATIVE = ["rtx2080/q4_k_m/512", "rtx4090/bf16/1024", "h100/fp8/512"]


@pytest.mark.committed_result("lab/results/card_fit.json")
@pytest.mark.parametrize("key", REPRESENTATIVE)
def test_a_committed_case_runs_again_to_the_same_answer(key: str) -> None:
    assert FIT is not None, "lab/results/card_fit.json is missing: run python -m lab.benchmarks.card_fit"
    card, layout, px = key.split("/")
    got, want = fit_case(card, layout, int(px)), FIT["cases"][key]
    for field in ("fits", "peak_reserved", "attention", "fallbacks", "failed"):
        assert got.get(field) == want.get(field), field


@pytest.mark.committed_result("lab/results/card_fit.json")
def test_the_disagreements_with_the_estimate_are_exactly_the_recorded_ones() -> None:
    estimate = _estimate()
    differ = set()
    for key, case in FIT["cases"].items():
        card, layout, px = key.split("/")
        said = estimated_fit(estimate, layout, int(px), FIT["cards"][card]["gb"])
        if said is not None and said != case["fits"]:
            differ.add(key)
    assert differ == set(FIT["versus_estimate"])
    for key, why in FIT["versus_estimate"].items():
        case = FIT["cases"][key]
        assert ("run fits" in why) == case["fits"]
        assert case["fits"] or case["failed"] in why


def test_an_unknown_card_is_refused_naming_the_choices(capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        card_fit.main(["--cards", "gtx1080"])
    err = capsys.readouterr().err
    assert "--cards: gtx1080 is not one of" in err and "rtx2080" in err and "h100" in err
