"""Every relative link in the project's Markdown points at a file that exists (one into lab/
only where the lab is there: the product's tests also run on a copy without it, and
lab/tests/docs/test_lab_links.py checks those links in the checkout)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
SKIP_DIRS = {".venv", ".git", "node_modules"}
LAB = ROOT / "lab"


def markdown_files():
    return sorted(p for p in ROOT.rglob("*.md") if not SKIP_DIRS & set(p.relative_to(ROOT).parts))


def relative_targets(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        yield target.split("#", 1)[0]


def into_lab(page: Path, target: str) -> bool:
    return (page.parent / target).resolve().is_relative_to(LAB)


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in relative_targets(page) if t and not (page.parent / t).exists()
               and (LAB.is_dir() or not into_lab(page, t))]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_every_page_under_docs_is_linked_from_another_page():
    """A reader reaches every guide and report by following links from the README (a page named
    only in backticks, or only by its folder, is one nobody finds); a folder's README.md is
    what its folder link shows."""
    linked = {(page.parent / t).resolve() for page in markdown_files()
              for t in relative_targets(page) if t}
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "README.md"]
    assert pages, "no page under docs/"
    orphans = [str(p.relative_to(ROOT)) for p in pages if p.resolve() not in linked]
    assert not orphans, f"pages no other page links to: {orphans}"


def test_readme_quick_start_holds_the_two_commands_ci_runs():
    """The Quick start is two commands: the main job (a real nano image on the CPU) and the
    tests, the latter exactly what .ci/run calls."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2, commands
    assert "demo.py" in commands[0] and commands[0].startswith("bash scripts/setup.sh")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert ci == [commands[1]] == ["bash scripts/test.sh"]
    assert readme.index("## Quick start") < readme.index("## Install into ComfyUI")


ISSUE = re.compile(r"\b(?:issues?|finding)\s+#?\d+(?:\s+finding)?|#\d{2,}\b", re.IGNORECASE)


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_cite_code_commits_or_results_never_an_issue_number(page):
    """A document outlives the tracker: it names the code, the commit or the results file."""
    text = page.read_text(encoding="utf-8")
    cited = [m.group(0) for m in ISSUE.finditer(text)]
    assert not cited, f"{page.relative_to(ROOT)} cites the tracker: {cited}"
