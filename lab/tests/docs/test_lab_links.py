"""The documents' links into lab/ resolve (the product's link test, tests/docs/test_docs_links.py,
runs on a copy without the lab too, where it cannot check them)."""

from __future__ import annotations

import pytest
from support import ROOT

from tests.docs.test_docs_links import into_lab, markdown_files, relative_targets


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_into_the_lab_resolve(page):
    into = [t for t in relative_targets(page) if t and into_lab(page, t)]
    missing = [t for t in into if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing lab files: {missing}"
