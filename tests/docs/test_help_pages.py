"""Each node's help page against the node as the server would describe it (issue 63): the
registry's schemas in /object_info's shape (support/help_pages.py has the rules; the same check
runs on the live server's /object_info in tests/host/test_comfyui_integration.py and on the
frontend's own nodes in tests/web/test_web_help_pages.py)."""

from __future__ import annotations

import pytest
from support.help_pages import DOCS, object_info_of, page_of, problems

from nodes import node_classes

INFO = object_info_of([c.define_schema() for c in node_classes()])


def test_every_node_has_its_help_page_and_no_page_is_left_over() -> None:
    assert {p.parent.name for p in DOCS.glob("*/en.md")} == set(INFO)
    assert not list(DOCS.glob("*.md")), "a page at docs/<node>.md costs the browser a 404 first"


@pytest.mark.parametrize("node_id", sorted(INFO))
def test_the_help_page_names_what_the_node_has(node_id: str) -> None:
    assert problems(node_id, page_of(node_id).read_text(encoding="utf-8"), INFO) == []


def test_the_checker_finds_a_socket_on_the_wrong_node() -> None:
    """The sentence issue 63 found on LADR Policy's page, and its corrected form."""
    page = page_of("LADR_Policy").read_text(encoding="utf-8")
    wrong = page + ("\nConnect its `policy` output to the sampler's optional `policy` input; "
                    "DiMOO Sampler (LADR)'s `strategy` widget.\n")
    found = problems("LADR_Policy", wrong, INFO)
    assert len(found) == 2 and "name the node" in found[0], found
    assert "DiMOO Sampler (LADR) has no such widget" in found[1], found
    right = page + "\nConnect it to **DiMOO Sampling Rule**'s optional `policy` input.\n"
    assert problems("LADR_Policy", right, INFO) == []
    folded = page.replace("**Advanced inputs**:", "Expert inputs:")
    assert any("Advanced inputs" in p for p in problems("LADR_Policy", folded, INFO))
