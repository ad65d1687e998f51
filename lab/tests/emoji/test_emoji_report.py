"""docs/reports/EMOJI.md shows the committed emoji results as lab.emoji.report writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.emoji import report

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reports" / "EMOJI.md"


@pytest.mark.parametrize("name", sorted(report.tables()))
def test_the_page_holds_each_table_of_the_results(name):
    text = report.tables()[name]
    if not text:
        pytest.skip(f"no results file for {name} yet")
    assert text in PAGE.read_text(encoding="utf-8"), (
        f"docs/reports/EMOJI.md lacks the {name} figures of lab/results: "
        f"paste `python -m lab.emoji.report`")
