"""lab/studies/strength.py and strength_measures.py: the changed prompts, the least-likely choice and the drawing share on
data where the answer is known; the study end to end on the shipped nano model at a tiny size
(counts and invariants, never timings or scores); and docs/reports/STRENGTH.md's tables against
the committed results file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from support import ROOT
from support.scripts import run_script

from lab.nano import scenes
from lab.studies import strength as st
from lab.studies import strength_measures as sm


def test_a_changed_prompt_changes_one_colour_or_one_shape() -> None:
    specs = scenes.quality_test_specs(140)
    kinds = set()
    for spec in specs:
        new = sm.changed_spec(spec)
        assert new == sm.changed_spec(spec) and scenes.caption_for(new) != scenes.caption_for(spec)
        assert (new.category, new.relation, len(new.objects)) == (
            spec.category, spec.relation, len(spec.objects))
        changed = [i for i, (a, b) in enumerate(zip(spec.objects, new.objects, strict=True))
                   if a != b]
        colours = {c for _, c in spec.objects if c}
        if colours:  # the first object's colour, to one the spec does not name
            kinds.add("colour")
            assert changed == [0] and new.objects[0][0] == spec.objects[0][0]
            assert new.objects[0][1] not in colours
        else:  # the first object's shape (every object's for counting), to an unnamed one
            kinds.add("shape")
            assert changed == (list(range(len(spec.objects))) if spec.category == "counting"
                               else [0])
            assert new.objects[0][0] not in {s for s, _ in spec.objects}
        assert scenes.spec_of_caption(scenes.caption_for(new)).objects == new.objects
    assert kinds == {"colour", "shape"}


def test_least_likely_takes_the_lowest_scores() -> None:
    scores = torch.tensor([[0.0, -3.0, -1.0, -2.0], [-5.0, 0.0, -0.5, -0.1]])
    chosen = sm.least_likely(scores, [2, 1], seed0=0)
    assert chosen.tolist() == [[False, True, False, True], [True, False, False, False]]


def test_the_drawing_share_ignores_the_background() -> None:
    before = np.zeros((3, 4, 4), dtype=np.int64)
    after = before.copy()
    before[0, :2, :2] = 1      # 4 drawn pixels, 2 of them kept, 1 new one drawn elsewhere
    after[0, :1, :2] = 1
    after[0, 3, 3] = 2
    before[1, 0, 0] = after[1, 0, 0] = 3
    assert sm.drawing_kept(before, after).tolist() == [pytest.approx(2 / 5), 1.0, 1.0]


def test_writes_rows_comparisons_and_keeps_the_unmasked_tokens(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    run_script("lab.studies.strength", "--prompts", "2", "--strengths", "0.5", "--settings",
               "baseline-64,ladr-nano", "--remask-passes", "1", "--threads", "0", "--json",
               str(out))
    doc = json.loads(out.read_text())
    rows = doc["strengths"]["0.5"]
    assert list(rows) == ["baseline-64", "ladr-nano", "baseline@ladr-nano",
                          "baseline-64+least-likely-p1", "baseline-64+sampled-codes"]
    from ladr_core import StepSchedule
    from ladr_core.strength import remask_count

    n = 144  # nano's 12 x 12 tokens
    for r in rows.values():  # each row re-masks by its own T (an odd T starts a step earlier)
        unmasked = 1 - remask_count(n, StepSchedule(r["steps"], 0.5).start, r["steps"]) / n
        for kind in st.PROMPTS:
            assert len(r[kind]["passed"]) == len(r[kind]["kept"]) == 2
            assert min(r[kind]["kept"]) >= unmasked - 1e-4  # known tokens never change
    assert rows["baseline-64"]["own"]["nfe"] == [32, 32]
    assert rows["baseline-64+least-likely-p1"]["own"]["nfe"] == [33, 33]  # + the scoring pass
    ladr = np.mean([rows["ladr-nano"][k]["nfe_mean"] for k in st.PROMPTS])
    assert rows["baseline@ladr-nano"]["steps"] == max(1, round(ladr / 0.5))
    assert [(c["a"], c["b"], c["prompt"]) for c in doc["compare"]] == [
        (a, b, k) for a, b in [("ladr-nano", "baseline-64"), ("ladr-nano", "baseline@ladr-nano"),
                               ("baseline-64+least-likely-p1", "baseline-64"),
                               ("baseline-64+sampled-codes", "baseline-64")]
        for k in st.PROMPTS]
    assert doc["env"]["git_commit"] and doc["meta"]["command"].startswith(
        "python -m lab.studies.strength")
    assert (tmp_path / "s_samples.png").is_file()


RESULTS = [ROOT / "lab" / "results" / f for f in ("strength.json", "strength_sampled.json")]
REPORT = ROOT / "docs" / "reports" / "STRENGTH.md"
FIGURE = re.compile(r"[-+]?\d+\.\d{3}|\d+\.\d{2}x")


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def _prose(text: str) -> str:
    """The report's text outside tables and indented command lines."""
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith(("|", "    ")))


@pytest.mark.committed_result("lab/results/strength.json")
def test_the_reports_figures_are_the_results_files() -> None:
    """Every table row the results files make is in STRENGTH.md, each file's command is, and
    every figure of its prose (3 decimals, or a ratio) is one the tables show."""
    report = REPORT.read_text()
    shown = ""
    for path in RESULTS:
        doc = json.loads(path.read_text())
        assert doc["env"]["git_commit"] and doc["env"]["processor"] and doc["env"]["cpus"]
        expected = st.markdown(doc)
        shown += expected
        assert expected.splitlines()[0] in report, path.name
        missing = [line for line in _table_lines(expected) if line not in report]
        assert not missing, f"STRENGTH.md lacks rows of {path.name}: {missing[:3]}"
        assert doc["meta"]["command"].removeprefix("python -m ") in report
    assert json.loads(RESULTS[0].read_text())["meta"]["strengths"] == list(st.STRENGTHS)
    unknown = [f for f in FIGURE.findall(_prose(report)) if f not in shown]
    assert not unknown, f"STRENGTH.md's text cites figures no table shows: {unknown}"


@pytest.mark.committed_result("lab/results/strength.json")
def test_the_figure_check_catches_a_changed_figure() -> None:
    doc = json.loads(RESULTS[0].read_text())
    doc["strengths"]["0.5"]["baseline-64"]["own"]["score_overall"] += 0.01
    report = REPORT.read_text()
    assert any(line not in report for line in _table_lines(st.markdown(doc)))


@pytest.mark.committed_result("lab/results/strength.json")
def test_the_help_pages_figures_are_the_results_file() -> None:
    """What the help pages say of the picture route on nano is strength.json's: the sources'
    pass rate, their VQ round trip's (and the share of tokens it keeps), and the official
    sampler's redraw at 0.5."""
    doc = json.loads(RESULTS[0].read_text())
    src = doc["source"]
    redraw = doc["strengths"]["0.5"]["baseline-64"]["own"]["score_overall"]
    said = (f"keeps {round(100 * src['roundtrip_mean'])} % of its tokens and drops the "
            f"evaluator's pass rate from {src['score_overall']:.3f} to "
            f"{src['roundtrip_overall']:.3f}")
    for page in ("LADR_DiMOOSampler2", "LADR_TokenCanvas"):
        text = " ".join((ROOT / "web" / "docs" / page / "en.md").read_text().split())
        assert said in text, page
    sampler = " ".join((ROOT / "web" / "docs" / "LADR_DiMOOSampler2" / "en.md").read_text().split())
    assert f"at denoise 0.5 it passes {redraw:.3f}" in sampler
