"""docs/reports/UNDERSTANDING_STUDY.md shows the numbers of the results files it cites.

Each table with a `results key` column is checked against the JSON named above it: in the
answer-rule table (lab/results/understanding.json) each rule's forwards per answer, accuracy
per kind and overall and its paired intervals against the official order; in the drawing table
(lab/results/nano_mmu_drawing.json) each checkpoint's score and the paired interval. The
sentence naming the fastest rule within the official order's interval is the file's pick. Each
file records its commit and machine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "docs" / "reports" / "UNDERSTANDING_STUDY.md"
CITED = re.compile(r"`(lab/results/[\w./-]+\.json)`")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
KINDS = ("caption", "color", "shape", "count", "position", "overall")

pytestmark = [pytest.mark.committed_result("lab/results/understanding.json"),
              pytest.mark.committed_result("lab/results/nano_mmu_drawing.json")]


def keyed_tables(text: str) -> list[tuple[str, list[dict[str, str]]]]:
    """(cited JSON, rows as {header: cell}) of each table with a `results key` column."""
    tables, cited, lines, i = [], None, text.splitlines(), 0
    while i < len(lines):
        found = CITED.findall(lines[i])
        cited = found[-1] if found else cited
        if lines[i].startswith("|") and "results key" in lines[i]:
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, [c.strip() for c in lines[i].strip("|").split("|")],
                                     strict=True)))
                i += 1
            tables.append((cited, rows))
        i += 1
    return tables


def close(cell: str, *expected: float) -> bool:
    """The cell's numbers equal `expected` within the rounding shown (a cell '-' is absent)."""
    shown = [float(x) for x in NUMBER.findall(cell)]
    first = NUMBER.search(cell)
    digits = len(first.group().split(".")[1]) if first and "." in first.group() else 0
    return len(shown) == len(expected) and all(
        abs(s - e) <= 0.5 * 10 ** -digits + 1e-9 for s, e in zip(shown, expected, strict=True))


def _interval(d: dict) -> tuple[float, float, float]:
    return d["diff"], d["lo"], d["hi"]


def check_rule_row(row: dict[str, str], doc: dict) -> None:
    key = row["results key"].strip("`")
    run = doc["rules"][key]
    assert close(row["forwards per answer"], run["nfe_mean"]), (key, row)
    for kind in KINDS:
        assert close(row[kind], run["accuracy"][kind]), (key, kind, row[kind])
    compare = doc["compare"].get(key, {})
    for column, field in (("vs official", "vs_official"),
                          ("vs official, same forwards", "vs_official_same_forwards")):
        if field in compare:
            assert close(row[column], *_interval(compare[field]["overall"])), (key, column)
        else:
            assert row[column] == "-", (key, column)


def check_drawing_row(row: dict[str, str], doc: dict) -> None:
    key = row["results key"].strip("`")
    assert close(row["score"], doc[key]["score"]["overall"]), (key, row)
    if key == "sibling":
        assert close(row["vs shipped"], *_interval(doc["sibling_minus_shipped"]["overall"]))


CHECKS = {"lab/results/understanding.json": check_rule_row,
          "lab/results/nano_mmu_drawing.json": check_drawing_row}
TABLES = keyed_tables(REPORT.read_text(encoding="utf-8")) if REPORT.is_file() else []


def _doc(cited: str) -> dict:
    doc = json.loads((ROOT / cited).read_text(encoding="utf-8"))
    env = doc.get("env") or {}
    assert env.get("git_commit"), f"{cited} records no commit"
    assert env.get("gpu") or env.get("processor"), f"{cited} records no machine"
    return doc


def test_the_report_has_both_tables() -> None:
    assert sorted(c for c, _ in TABLES) == sorted(CHECKS), TABLES


@pytest.mark.parametrize("cited,rows", TABLES, ids=[c for c, _ in TABLES])
def test_every_figure_is_the_cited_files(cited: str, rows: list[dict[str, str]]) -> None:
    doc = _doc(cited)
    assert rows
    for row in rows:
        CHECKS[cited](row, doc)


def test_the_pick_is_the_files() -> None:
    pick = _doc("lab/results/understanding.json")["pick"]
    text = REPORT.read_text(encoding="utf-8")
    found = re.search(r"fastest rule within[^:]*: `([\w+@-]+)`,\s+([\d.]+)\s+forwards\s+per\s+answer"
                      r"\s+against\s+the\s+official\s+order's\s+([\d.]+)", text)
    assert found, "the report does not name the fastest rule within the official interval"
    assert found.group(1) == str(pick["fastest_within"])
    assert close(found.group(2), pick["fastest_nfe_mean"])
    assert close(found.group(3), pick["official_nfe_mean"])


def test_the_check_catches_a_changed_figure() -> None:
    cited, rows = next(t for t in TABLES if t[0] == "lab/results/understanding.json")
    row = dict(rows[0])
    row["overall"] = f"{float(NUMBER.findall(row['overall'])[0]) + 0.05:.2f}"
    with pytest.raises(AssertionError):
        check_rule_row(row, _doc(cited))


@pytest.mark.committed_result("lab/results/understand.json")
@pytest.mark.parametrize("page", ["LADR_DiMOOCaption", "LADR_DiMOOAsk"])
def test_the_help_pages_memory_figures_are_the_benchmarks(page: str) -> None:
    """Caption / Ask help: the 8B answer's memory beside the weights at temperature 0 and above
    0, as sampled (chunked), from lab/results/understand.json (projected)."""
    text = " ".join((ROOT / "web" / "docs" / page / "en.md").read_text(encoding="utf-8").split())
    found = re.search(r"([\d.]+) GiB at temperature 0 and ([\d.]+) GiB above 0, projected: "
                      r"`lab/results/understand.json`", text)
    assert found, f"{page} does not give the answer's memory"
    memory = _doc("lab/results/understand.json")["projected_8b"]["answer_memory_bytes"]
    assert close(found.group(1), memory["t0_chunked"] / 2**30)
    assert close(found.group(2), memory["t1_chunked"] / 2**30)


@pytest.mark.committed_result("lab/results/understand.json")
def test_sampling_in_chunks_is_what_cuts_the_8b_answers_memory() -> None:
    """At the 8B shape the float64 sampling dominates: chunks cut it at temperature 0 and 1."""
    memory = _doc("lab/results/understand.json")["projected_8b"]["answer_memory_bytes"]
    assert memory["t0_chunked"] < memory["t0_whole"] < memory["t1_whole"]
    assert memory["t0_chunked"] < memory["t1_chunked"] < memory["t1_whole"]


@pytest.mark.committed_result("lab/results/understand.json")
def test_the_cpu_caption_times_are_the_benchmarks() -> None:
    doc = _doc("lab/results/understand.json")
    assert doc["model"] == "nano-mmu" and not doc["forced"]
    rows = {r["rule"]: r for r in doc["rules"]}
    text = " ".join(REPORT.read_text(encoding="utf-8").split())
    found = re.search(r"the official order takes ([\d.]+) s for its (\d+) forwards, "
                      r"`threshold\+stop` ([\d.]+) s for (\d+) \(([\d.]+) of the official time\)",
                      text)
    assert found, "the report does not give the CPU caption times"
    fast = rows["threshold+stop"]
    assert close(found.group(1), rows["official"]["seconds"])
    assert int(found.group(2)) == rows["official"]["forwards"]
    assert close(found.group(3), fast["seconds"]) and int(found.group(4)) == fast["forwards"]
    assert close(found.group(5), fast["time_vs_official"])
