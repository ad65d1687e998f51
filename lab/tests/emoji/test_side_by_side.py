"""The side-by-side page of the two testbeds (lab.emoji.side_by_side): the committed page is what
the committed results files give, and the travel rule holds on emoji documents the verdict
harness itself writes (a tiny checkpoint's, past the gate and refused at it)."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch
from test_emoji_verdicts import _opts, disc_bank, tiny  # noqa: F401 (fixtures)

from lab.benchmarks.common import json_text
from lab.emoji import side_by_side as S
from lab.emoji import train as T
from lab.emoji import verdicts as V

PAGE = S.PAGE


def test_the_committed_page_is_what_the_results_files_give():
    text = PAGE.read_text(encoding="utf-8")
    assert S.page_with(text, S.current_block()) == text, (
        "docs/reports/TESTBEDS.md is not what the results files give: run "
        "python -m lab.emoji.side_by_side --docs")


def test_every_claim_reads_a_nano_figure_from_a_committed_file():
    for row in S.rows():
        assert isinstance(row.nano, S.Figure), (row.claim.text, row.nano)
        assert row.nano.where and (row.nano.word or row.nano.lo <= row.nano.diff <= row.nano.hi)


def test_the_emoji_column_reads_the_full_run_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "RESULTS", tmp_path)
    assert S.emoji_doc() is None
    gate = S.EMOJI_FILES[1]
    shutil.copy(S.ROOT / "lab" / "results" / gate, tmp_path / gate)
    assert S.emoji_doc()[0] == gate
    (tmp_path / S.EMOJI_FILES[0]).write_text('{"gate": {}}')
    assert S.emoji_doc()[0] == S.EMOJI_FILES[0]


def _fig(diff: float, lo: float, hi: float) -> S.Figure:
    return S.Figure(diff, lo, hi, "", "")


def test_the_travel_rule():
    worse, undecided, better = _fig(-0.1, -0.2, -0.05), _fig(0.0, -0.1, 0.1), _fig(0.1, 0.05, 0.2)
    assert undecided.verdict == "no difference detected" and worse.verdict == "worse"
    assert _fig(0.0, 0.0, 0.1).verdict == "no difference detected"  # 0 included: no verdict
    assert S.travel(worse, _fig(-0.3, -0.5, -0.01)) == "travels"
    assert S.travel(undecided, _fig(0.05, -0.01, 0.2)) == "travels"
    assert S.travel(worse, better) == "disagrees"
    assert S.travel(worse, undecided) == "disagrees"
    assert S.travel(worse, S.Missing("why")) == "not measured"
    assert S.travel(S.Missing("why"), better) == "not measured"
    ref = S.Figure(None, None, None, "", "", word=S.REFERENCE)
    assert S.travel(ref, ref) == "travels" and S.travel(ref, undecided) == "disagrees"


@pytest.fixture(scope="module")
def emoji_docs(tiny, disc_bank):  # noqa: F811
    """(refused, full): the harness's documents on the tiny checkpoint, as its file holds them
    (its checkpoint's curve beside them, through JSON)."""
    pipe, judge = tiny
    info = V.curve(torch.load(T.runs_dir() / "transformer_ckpt.pt", weights_only=False))
    out = []
    for gate in (1.01, 0.0):
        doc = V.run(pipe, judge, disc_bank, T.model_dir(), _opts(gate), log=lambda *a: None)
        doc.pop("_sheet")
        out.append(json.loads(json_text({"checkpoint": info, **doc})))
    return out


def test_a_refused_gate_leaves_every_emoji_cell_not_measured(emoji_docs):
    refused = emoji_docs[0]
    found = S.rows(("emoji_verdicts.json", refused))
    assert all(isinstance(r.emoji, S.Missing) and "gate refused" in r.emoji.reason
               and r.travels == "not measured" for r in found)
    text = S.block(found, ("emoji_verdicts.json", refused))
    assert "The gate refused" in text and S.disagreements(found) == []


def test_past_the_gate_every_measured_claim_has_an_emoji_interval(emoji_docs):
    full = emoji_docs[1]
    strengths = {str(s) for s in _opts(0.0)["strengths"]}
    for row in S.rows(("emoji_verdicts.json", full)):
        text = row.claim.text
        expect_missing = ("ML-Cache `ladr` against 64" in text or "Understanding" in text
                          or ("Image to image" in text and not any(f" {s}:" in text
                                                                   for s in strengths)))
        assert isinstance(row.emoji, S.Missing) == expect_missing, (text, row.emoji)
        if isinstance(row.emoji, S.Figure) and not row.emoji.word:
            assert row.emoji.lo - 1e-9 <= row.emoji.diff <= row.emoji.hi + 1e-9
            assert row.travels in ("travels", "disagrees")
    understanding = next(r for r in S.rows(("emoji_verdicts.json", full))
                         if "Understanding" in r.claim.text)
    assert understanding.emoji.reason in full["understanding"]  # the harness's own words


def _with_interval(doc: dict, a: str, b: str, interval: dict) -> dict:
    doc = copy.deepcopy(doc)
    row = next(c for c in doc["t2i"]["compare"] if c["a"] == a and c["b"] == b)
    row["diff"]["overall"] = interval
    return doc


def test_disagreements_lists_a_claim_whose_emoji_verdict_differs(emoji_docs):
    """The emoji interval of `nano` against 64 steps set to nano's own, then to its mirror."""
    claim = S.CLAIMS[0]
    nano = claim.nano()
    same = {"diff": nano.diff, "lo": nano.lo, "hi": nano.hi}
    mirror = {"diff": -nano.diff, "lo": -nano.hi, "hi": -nano.lo}
    for interval, listed in ((same, False), (mirror, True)):
        doc = _with_interval(emoji_docs[1], "ladr-nano", "baseline-64", interval)
        found = S.rows(("emoji_verdicts.json", doc), claims=(claim,))
        assert (claim.text in S.disagreements(found)) == listed
        assert found[0].travels == ("disagrees" if listed else "travels")


def test_an_understanding_section_in_the_studys_layout_is_read(emoji_docs):
    doc = copy.deepcopy(emoji_docs[1])
    doc["understanding"] = S.nano_doc("understanding.json")
    row = S.rows(("emoji_verdicts.json", doc), claims=(S.CLAIMS[-1],))[0]
    assert isinstance(row.emoji, S.Figure) and row.travels == "travels"
    doc["understanding"] = {"rules": {}}
    row = S.rows(("emoji_verdicts.json", doc), claims=(S.CLAIMS[-1],))[0]
    assert isinstance(row.emoji, S.Missing) and "lacks" in row.emoji.reason
