"""The estimate's generated parts of the documents, between markers:

    <!-- gpu_estimate:begin NAME -->
    ...generated from lab/results/gpu_estimate.json...
    <!-- gpu_estimate:end -->

docs/reports/GPU.md holds ``estimate`` (Sec. 7) and ``roofline`` (time per card, from
lab/results/roofline.json), README.md ``readme`` (its card table, with the roofline's row). The
``gpu_check:`` markers of the same files belong to lab/benchmarks/gpu_check and are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lab.benchmarks.common import REPO_ROOT

from .render import gpu_block, readme_block, roofline_block

__all__ = ["BLOCKS", "check_docs", "update_docs"]

BLOCKS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "docs/reports/GPU.md": {"estimate": gpu_block, "roofline": roofline_block},
    "README.md": {"readme": readme_block},
}
PATTERN = r"(<!-- gpu_estimate:begin {name} -->\n)(.*?)(<!-- gpu_estimate:end -->)"


def _rewritten(text: str, name: str, body: str, path: str) -> str:
    pattern = re.compile(PATTERN.format(name=re.escape(name)), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no <!-- gpu_estimate:begin {name} --> ... "
                         "<!-- gpu_estimate:end --> block")
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(3), text)


def _render(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """path -> (current text, text with every block regenerated)."""
    out = {}
    for path, blocks in BLOCKS.items():
        text = (REPO_ROOT / path).read_text()
        new = text
        for name, render in blocks.items():
            new = _rewritten(new, name, render(doc), path)
        out[path] = (text, new)
    return out


def update_docs(doc: dict[str, Any]) -> list[str]:
    """Rewrite every block from ``doc``; the paths that changed."""
    changed = []
    for path, (old, new) in _render(doc).items():
        if new != old:
            (REPO_ROOT / path).write_text(new)
            changed.append(path)
    return changed


def check_docs(doc: dict[str, Any]) -> list[str]:
    """The paths whose blocks differ from what ``doc`` gives."""
    return [path for path, (old, new) in _render(doc).items() if new != old]
