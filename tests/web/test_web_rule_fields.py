"""The rule widgets of DiMOO Sampling Rule and the legacy sampler in the web extension (web/ladr_rules.js, logic in
web/ladr_rule_fields.js), in node, on the table the node really sends
(nodes.rules.applies_table): for every strategy, exactly the rule widgets it does not read are
greyed out, on the node and in the Parameters panel's options; choosing another strategy
updates them at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.browser import extension_stub

from ladr_core import strategy_names
from nodes import node_classes
from nodes.rules import WIDGETS, SamplingRuleNode, applies, applies_table
from nodes.sampler_legacy import LegacyDiMOOSampler

NODES = [c for c in node_classes()  # every node with the rule widgets
         if {i.id for i in c.define_schema().inputs} >= {"strategy", *WIDGETS}]

ROOT = Path(__file__).resolve().parents[2]

REGISTER = """
import { app } from "./scripts/app.js";
await import("./extensions/ComfyUI-LADR/ladr_rules.js");
const [nodeData, names, choices] = JSON.parse(process.argv[2]);
const ext = app.extensions[0];
function NodeType() {}
NodeType.prototype.onNodeCreated = function () {};
ext.beforeRegisterNodeDef(NodeType, nodeData);
const node = new NodeType();
node.widgets = [{ name: "strategy", value: choices[0] },
                ...names.map((n) => ({ name: n, value: 0.5, options: { min: -1 } }))];
node.onNodeCreated();
const seen = () => Object.fromEntries(node.widgets.filter((w) => w.name !== "strategy")
  .map((w) => [w.name, { disabled: w.disabled, panel: w.options.disabled }]));
const out = { [choices[0]]: seen() };
const strategy = node.widgets.find((w) => w.name === "strategy");
for (const chosen of choices.slice(1)) {
  strategy.value = chosen; strategy.callback(chosen); out[chosen] = seen();
}
console.log(JSON.stringify(out));
"""


def _node_data(node: type = SamplingRuleNode) -> dict:
    """A node's definition as ComfyUI's frontend receives its strategy widget."""
    schema = node.define_schema()
    strategy = next(i for i in schema.inputs if i.id == "strategy")
    return {"name": schema.node_id, "input": {"required": {"strategy": [
        list(strategy.options), dict(strategy.extra_dict)]}}}


def test_the_rule_node_and_the_legacy_sampler_carry_the_rule_widgets() -> None:
    assert [SamplingRuleNode, LegacyDiMOOSampler] == NODES


def test_the_table_is_every_strategy_with_the_fields_it_has() -> None:
    table = _node_data()["input"]["required"]["strategy"][1]["ladr_rules"]
    assert table == applies_table() and set(table) == set(strategy_names())
    assert table["threshold"] == ["tau", "token"] and table["entropy"] == ["gamma", "token"]
    assert table["ladr"] == table["baseline"] == table["halton"] == []


@pytest.mark.parametrize("node", NODES, ids=lambda c: c.define_schema().node_id)
def test_extension_greys_what_the_chosen_strategy_does_not_read(tmp_path: Path,
                                                                node: type) -> None:
    extension_stub(tmp_path)
    (tmp_path / "main.mjs").write_text(REGISTER)
    choices = ["ladr", *[n for n in strategy_names() if n != "ladr"], "threshold", "ladr"]
    proc = subprocess.run(["node", str(tmp_path / "main.mjs"),
                           json.dumps([_node_data(node), list(WIDGETS), choices])],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for name in choices:
        greyed = {w for w, s in out[name].items() if s["disabled"]}
        assert greyed == set(WIDGETS) - set(applies(name)), name
        assert all(s["panel"] == s["disabled"] for s in out[name].values()), name
