"""README's headline tables as data: which results file each `results key` row cites, and the
official sampler a key is compared with at the same forwards.

Shared by the test that holds README to its files (lab/tests/docs/test_readme_figures.py) and
by the side-by-side page of the two testbeds (lab.emoji.side_by_side), so both read README the
same way.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CITED = re.compile(r"`(lab/results/[\w./-]+\.json)`")


def keyed_tables(text: str) -> list[tuple[str, list[dict[str, str]]]]:
    """(cited JSON, rows as {header: cell}) for each table with a `results key` column; the
    cited JSON is the last `lab/results/*.json` named on a line above the table."""
    tables, cited, lines = [], None, text.splitlines()
    i = 0
    while i < len(lines):
        found = CITED.findall(lines[i])
        cited = found[-1] if found else cited
        if lines[i].startswith("|") and "results key" in lines[i]:
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows = []
            i += 2  # the header's separator line
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip("|").split("|")]
                rows.append(dict(zip(header, cells, strict=True)))
                i += 1
            tables.append((cited, rows))
        i += 1
    return tables


def cited_file(key: str, text: str | None = None) -> str:
    """The results file README cites for the row whose results key is `key`."""
    text = README.read_text(encoding="utf-8") if text is None else text
    for cited, rows in keyed_tables(text):
        if any(r["results key"].strip("`") == key for r in rows):
            return cited
    raise KeyError(f"README.md has no headline row with results key `{key}`; add the row or "
                   "name the results file for this claim in lab/emoji/side_by_side.py")


def same_forwards(key: str, nfe_mean: float) -> tuple[str, ...]:
    """The official sampler at `key`'s forwards, in the order a results file may name it:
    baseline@<key> (quality.py's pairing), of the key without its cache or its `ladr-`
    prefix (painting's `baseline@nano`), or baseline-<the key's NFE, rounded>."""
    return (f"baseline@{key}", f"baseline@{key.split('+')[0]}",
            f"baseline@{key.removeprefix('ladr-')}", f"baseline-{round(nfe_mean)}")
