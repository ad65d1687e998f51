"""README's headline figures are the numbers of the results file they cite.

Every table in README.md with a `results key` column is checked against the JSON that the
paragraph above it names (`lab/results/<name>.json`): the forward passes, the cut in
token-forwards, the score and the paired intervals of each row, within the rounding shown. The
file itself must record the commit it ran on and the machine it ran on.
"""

from __future__ import annotations

import json
import re

import pytest

from lab.studies.readme_tables import README, ROOT, keyed_tables, same_forwards

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(cell.replace("`", ""))]


def _decimals(cell: str) -> int:
    first = NUMBER.search(cell)
    return len(first.group().split(".")[1]) if first and "." in first.group() else 0


def _close(shown: float, value: float, decimals: int) -> bool:
    return abs(shown - value) <= 0.5 * 10 ** -decimals + 1e-9


def _interval(compare: list[dict], a: str, *refs: str) -> list[float]:
    """The overall paired difference of `a` against the first of `refs` the file compares."""
    row = next((c for b in refs for c in compare if c["a"] == a and c["b"] == b), None)
    assert row is not None, f"the results file has no comparison of {a} with {refs}"
    d = row["diff"]["overall"]
    return [d["diff"], d["lo"], d["hi"]]


def _check_interval(cell: str, expected: list[float], what: str) -> None:
    shown = _numbers(cell)
    assert len(shown) == 3, f"{what}: {cell!r} is not 'diff [lo, hi]'"
    digits = _decimals(cell)
    assert all(_close(s, e, digits) for s, e in zip(shown, expected, strict=True)), (
        f"{what}: README shows {cell!r}, the results file says {expected}")


def check_row(row: dict[str, str], doc: dict) -> None:
    key = row["results key"].strip("`")
    runs = doc["strategies"]
    assert key in runs, f"README row {key!r} is not in the results file"
    run, ref = runs[key], runs["baseline-64"]
    nfe_cell = row["forward passes per image"]
    assert _close(_numbers(nfe_cell)[0], run["nfe_mean"], _decimals(nfe_cell)), key
    cut_cell = row["token-forwards cut"]
    cut = ref["token_forwards_mean"] / run["token_forwards_mean"]
    assert _close(_numbers(cut_cell)[0], cut, _decimals(cut_cell)), (key, cut_cell, cut)
    assert _close(_numbers(row["score"])[0], run["score_overall"], _decimals(row["score"])), key
    same = same_forwards(key, run["nfe_mean"])  # the official sampler at the same forwards
    for column, refs in (("vs official, 64 steps", ("baseline-64",)),
                         ("vs official, same forwards", same)):
        if row.get(column):
            _check_interval(row[column], _interval(doc["compare"], key, *refs), f"{key} {column}")


TABLES = keyed_tables(README.read_text(encoding="utf-8"))


def test_readme_has_a_headline_table_tied_to_a_results_file() -> None:
    assert TABLES, "README.md has no table with a `results key` column"
    assert all(cited for cited, _ in TABLES), "a keyed table names no results file above it"


@pytest.mark.parametrize("cited,rows", TABLES, ids=[c or "none" for c, _ in TABLES])
def test_every_headline_figure_is_the_cited_files(cited: str, rows: list[dict]) -> None:
    doc = json.loads((ROOT / cited).read_text(encoding="utf-8"))
    env = doc.get("env") or {}
    assert env.get("git_commit"), f"{cited} records no commit"
    assert env.get("gpu") or env.get("processor"), f"{cited} records no device"
    for row in rows:
        check_row(row, doc)


def test_the_check_catches_a_changed_figure() -> None:
    """The row check fails when a shown figure differs from the file by more than rounding."""
    cited, rows = TABLES[0]
    doc = json.loads((ROOT / cited).read_text(encoding="utf-8"))
    row = dict(rows[-1])
    row["score"] = f"{float(_numbers(row['score'])[0]) + 0.01:.3f}"
    with pytest.raises(AssertionError):
        check_row(row, doc)
