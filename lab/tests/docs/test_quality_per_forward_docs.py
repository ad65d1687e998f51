"""README's quality-per-forward block, its figure and docs/reports/QUALITY_PER_FORWARD.md are
made from the committed results file alone, and that file's rows are the committed run store's
(lab/studies/quality_per_forward_report.py): no figure the runs did not give."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image

from lab.studies import quality_per_forward as Q
from lab.studies import quality_per_forward_report as R

pytestmark = pytest.mark.committed_result("lab/results/quality_per_forward.json")
DOC = json.loads(R.RESULTS.read_text(encoding="utf-8"))


def test_the_file_records_commit_and_machine_of_every_row() -> None:
    assert DOC["env"]["git_commit"] and DOC["env"]["processor"]
    assert DOC["meta"]["rounding"] == Q.ROUNDING
    for row in DOC["rows"]:
        assert row["commit"] and row["device"] and row["prompts"] == \
            DOC["meta"]["testbeds"][row["model"]]["n"], row


def test_the_rows_are_the_committed_run_stores() -> None:
    beds = [Q.TESTBEDS[name](DOC["meta"]["testbeds"][name]["n"]) for name in Q.TESTBEDS]
    cfgs = {name: t["cfg"] for name, t in DOC["meta"]["testbeds"].items()}
    again = R.collect(beds, Q.RUNS, cfgs)
    assert again["rows"] == DOC["rows"]
    assert again["pending"] == DOC["pending"]


def test_readme_shows_the_block_made_from_the_file() -> None:
    text = R.README.read_text(encoding="utf-8")
    found = re.search(R.BLOCK, text, flags=re.S)
    assert found, "README.md has no quality_per_forward block"
    assert found.group(2) == R.readme_block(DOC), (
        "README's block differs from the results file: run python -m "
        "lab.studies.quality_per_forward_report --from-file")


def test_the_report_page_is_made_from_the_file() -> None:
    page = R.REPORT.read_text(encoding="utf-8")
    assert R.table(DOC) in page and R.summary(DOC) in page and R.verdict_table(DOC) in page


def test_the_figure_is_drawn_from_the_file(tmp_path) -> None:
    shown = any(r["grid"] for r in DOC["rows"])
    in_readme = "quality_per_forward.png" in R.README.read_text(encoding="utf-8")
    assert in_readme == shown  # no picture of nothing
    R.figure(DOC, tmp_path / "again.png")
    committed = np.asarray(Image.open(R.FIGURE).convert("RGB"))
    again = np.asarray(Image.open(tmp_path / "again.png").convert("RGB"))
    assert committed.shape == again.shape and (committed == again).all(), (
        "lab/results/quality_per_forward.png is not the results file's figure")


def test_the_check_catches_a_changed_figure() -> None:
    if not DOC["rows"]:
        pytest.skip("no complete row yet")
    changed = json.loads(json.dumps(DOC))
    changed["rows"][0]["score"] += 0.01
    assert R.table(changed) != R.table(DOC)
