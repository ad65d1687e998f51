"""Each node's help as a user opens it in the REAL ComfyUI 0.33 frontend (1.49.6, headless
Chromium, 1600 x 1000), driven by tests/web/help_pages.mjs against a real server (issue 63):

* no request for a help page is answered 404: frontend 1.49.6 asks for
  docs/<node>/<locale>.md first and docs/<node>.md after (before, every help it opened logged
  a 404 for LADR_<node>/en.md), and the page it shows is the pack's;
* each page names only sockets and widgets the frontend's own nodes have, describes every
  input and lists the inputs marked advanced (the rules of support/help_pages.py, run on the
  nodes the frontend built: before, LADR Policy's page sent its output to "the sampler's"
  policy input, and said its expert fields were folded away on the node);
* LADR Policy's advanced inputs are where its page says: drawn on the node like the others,
  and in the Parameters panel apart, under its "Advanced Inputs" section, folded.

Skipped without COMFYUI_PATH (scripts/host.sh), node, playwright-core or chromium. The panel's
screenshot stays in pytest's temporary folder (parameters_LADR_Policy.png).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support import ROOT
from support.browser import require_browser
from support.help_pages import page_of, problems

from nodes import node_classes

pytestmark = [pytest.mark.comfyui, pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout (scripts/host.sh)")]
TYPES = sorted(c.define_schema().node_id for c in node_classes())


@pytest.fixture(scope="module")
def shown(server, tmp_path_factory):
    require_browser()
    port, _ = server
    out = tmp_path_factory.mktemp("help")
    proc = subprocess.run(["node", str(ROOT / "tests" / "web" / "help_pages.mjs"),
                           f"http://127.0.0.1:{port}", str(out), ",".join(TYPES)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "help.json").read_text())


def frontend_info(nodes: dict) -> dict:
    """The nodes the frontend built, in /object_info's shape: every input slot and widget
    (a widget with its `advanced` flag), the outputs, the title as the display name."""
    info = {}
    for node_id, n in nodes.items():
        inputs = {i["name"]: ["SOCKET", {}] for i in n["inputs"] if not i["widget"]}
        inputs.update({w["name"]: ["INT", {"advanced": w["advanced"]}] for w in n["widgets"]
                       if w["name"] not in ("ladr_preview", "control_after_generate")})
        info[node_id] = {"display_name": n["title"], "input": {"required": inputs},
                         "output_name": n["outputs"]}
    return info


def test_no_help_request_is_answered_404(shown) -> None:
    asked = [d for d in shown["docs"] if d["node"]]
    assert {d["node"] for d in asked} == set(TYPES)
    assert [d for d in asked if d["status"] != 200] == []
    for node in TYPES:  # one request each: the address the frontend tries first
        urls = [d["url"].split("/docs/", 1)[1] for d in asked if d["node"] == node]
        assert urls == [f"{node}/en.md"], urls


def test_the_help_shown_is_the_nodes_page(shown) -> None:
    for node in TYPES:
        help_text = shown["nodes"][node]["help"]
        title = page_of(node).read_text().splitlines()[0].removeprefix("# ")
        assert help_text and help_text.splitlines()[0] == title, (node, help_text)


def test_help_pages_name_what_the_frontends_nodes_have(shown) -> None:
    info = frontend_info(shown["nodes"])
    found = [p for n in TYPES for p in problems(n, page_of(n).read_text(), info)]
    assert found == []


def test_advanced_inputs_are_where_the_policy_page_says(shown) -> None:
    page = " ".join(page_of("LADR_Policy").read_text().split())
    assert ("On the node they show like the other fields; the right-hand Parameters panel "
            "lists them apart, under *Advanced Inputs*.") in page
    widgets = shown["nodes"]["LADR_Policy"]["widgets"]
    advanced = {w["name"] for w in widgets if w["advanced"]}
    assert advanced and all(w["drawn"] for w in widgets if w["advanced"] and not w["hidden"])
    texts = [t["text"] for t in shown["parameters"]]
    assert "ADVANCED INPUTS" in [t.upper() for t in texts]
    section = [t.upper() for t in texts].index("ADVANCED INPUTS")
    above = {t.split(" = ")[0] for t in texts[:section]}
    assert "delayed" in above and not advanced & above  # the plain fields listed, not these
    assert not advanced & {t.split(" = ")[0] for t in texts[section:]}  # folded
