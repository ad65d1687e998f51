"""The documents' links into lab/ resolve, and the lab's own pages follow the product's page rules
(tests/docs/test_docs_links.py, which also runs on a copy without the lab, where it can check
neither): every relative link resolves, no page cites a tracker issue."""

from __future__ import annotations

import pytest
from support import ROOT

from tests.docs.test_docs_links import ISSUE, LAB, into_lab, markdown_files, relative_targets

LAB_PAGES = [p for p in markdown_files() if p.is_relative_to(LAB)]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_into_the_lab_resolve(page):
    into = [t for t in relative_targets(page) if t and into_lab(page, t)]
    missing = [t for t in into if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing lab files: {missing}"


@pytest.mark.parametrize("page", LAB_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_lab_page_links_resolve_and_cite_no_issue(page):
    missing = [t for t in relative_targets(page) if t and not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"
    cited = [m.group(0) for m in ISSUE.finditer(page.read_text(encoding="utf-8"))]
    assert not cited, f"{page.relative_to(ROOT)} cites the tracker: {cited}"


def test_the_lab_has_pages():
    assert (LAB / "README.md") in LAB_PAGES
