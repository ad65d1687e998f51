"""Every relative link in the project's Markdown points at a file that exists."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
SKIP_DIRS = {".venv", ".git", "node_modules"}


def markdown_files():
    return sorted(p for p in ROOT.rglob("*.md") if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def relative_targets(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        yield target.split("#", 1)[0]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in relative_targets(page) if t and not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_lab_reports_live_in_docs_reports():
    guides = {"INSTALL.md", "ARCHITECTURE.md", "SAMPLING.md", "CONVENTIONS.md"}
    assert {p.name for p in (ROOT / "docs").glob("*.md")} <= guides
