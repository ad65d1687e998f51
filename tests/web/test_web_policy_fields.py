"""The LADR Policy node's field logic (web/ladr_policy_fields.js) in node, on the preset table
the node really sends (nodes.policy.preset_table): under a preset the fields show its values and
are disabled and the preset widget names the T it brings; under custom they are editable."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.browser import extension_stub

from ladr_core import PRESETS, AdaptiveRescue, LADRPolicy
from nodes.policy import policy_fields, preset_table, switch_table

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import { applyFieldState } from "%s";
const [presets, names, choices, rescueSwitch, typed, mins] = JSON.parse(process.argv[1]);
const out = {};
for (const chosen of choices) {  // "paper>custom": paper, then custom on the same widgets
  const widgets = [{ name: "preset" },
                   ...names.map((n) => ({ name: n, value: n in typed ? typed[n] : "typed",
                                          options: mins[n] == null ? {} : { min: mins[n] } }))];
  for (const step of chosen.split(">")) applyFieldState(widgets, presets, step, rescueSwitch);
  out[chosen] = widgets;
}
console.log(JSON.stringify(out));
"""


def _mins() -> dict[str, float | None]:
    """Each field's `min` as the frontend puts it into the widget's options."""
    from nodes.cache import MLCacheOptions
    from nodes.policy import LADRPolicyNode

    return {i.id: getattr(i, "min", None) for node in (LADRPolicyNode, MLCacheOptions)
            for i in node.define_schema().inputs}


def _apply(table: dict, names: list[str], choices: list[str], switch: dict | None = None,
           typed: dict | None = None) -> dict[str, list[dict]]:
    """applyFieldState in node for each chosen preset: {choice: the widgets after it}. The
    widgets start at "typed" (or the value in `typed`), as a user left them."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    module = (ROOT / "web" / "ladr_policy_fields.js").as_uri()
    proc = subprocess.run(["node", "--input-type=module", "-e", SCRIPT % module,
                           json.dumps([table, names, choices, switch, typed or {}, _mins()])],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_fields_follow_the_preset() -> None:
    names = list(policy_fields(next(iter(__import__("ladr_core").PRESETS.values())).policy))
    out = _apply(preset_table(), names, ["nano", "paper", "custom", "paper>custom"],
                 switch_table())
    nano = {w["name"]: w for w in out["nano"]}
    assert nano["preset"]["label"] == "preset"  # a preset brings no T: the sampler's steps run
    assert nano["tau_structure"]["value"] == 0.9 and nano["seen_only"]["value"] is True
    assert all(w["disabled"] for n, w in nano.items() if n != "preset")
    paper = {w["name"]: w for w in out["paper"]}
    assert paper["preset"]["label"] == "preset" and paper["tau_refinement"]["value"] == -1.0
    # disabled widgets are drawn without their value: the label carries it
    assert paper["tau_structure"]["label"] == "tau_structure = 0.05"
    assert paper["tau_refinement"]["label"] == "tau_refinement = -1 (none)"
    # the Parameters panel reads the widget's options: greyed and hidden as on the node
    assert paper["tau_structure"]["options"] == {"disabled": True, "hidden": False,
                                                 "ladrMin": -1}  # no fill bar while greyed
    assert paper["pace"]["options"] == {"disabled": True, "hidden": True, "ladrMin": 0}
    assert "label" not in nano["seen_only"]  # a toggle draws its own state
    assert nano["metric"]["label"] == "metric = margin"
    custom = {w["name"]: w for w in out["custom"]}
    assert not any(w.get("disabled") for n, w in custom.items() if n != "preset")
    assert not any(w.get("label") for n, w in custom.items() if n != "preset")
    assert not any(w["options"]["disabled"] for n, w in custom.items() if n != "preset")
    back = {w["name"]: w for w in out["paper>custom"]}  # custom after a preset: min back
    assert back["tau_structure"]["options"] == {"disabled": False, "hidden": False, "min": -1}
    assert custom["tau_structure"]["value"] == "typed"  # custom keeps what the user typed


TAU_ALPHA = [f"{k}_{ph}" for k in ("tau", "alpha") for ph in ("exploration", "structure",
                                                                   "refinement")]


def _shown(widgets: list[dict]) -> dict[str, dict]:
    return {w["name"]: w for w in widgets if not w.get("hidden")}


def test_adaptive_preset_shows_its_own_fields_not_tau_alpha() -> None:
    """Under `adaptive` the node hides tau, alpha and delayed (the rescue ignores them) and
    shows pace and anchor_quantile with the preset's values; under `paper` the reverse."""
    names = list(policy_fields(LADRPolicy()))
    out = _apply(preset_table(), names, ["adaptive", "paper", "nano"], switch_table())
    adaptive = _shown(out["adaptive"])
    assert not set(TAU_ALPHA + ["delayed"]) & set(adaptive)
    preset = PRESETS["adaptive"].policy.adaptive
    assert adaptive["pace"]["value"] == preset.pace
    assert adaptive["anchor_quantile"]["label"] == f"anchor_quantile = {preset.anchor_quantile:g}"
    assert adaptive["adaptive"]["value"] is True and adaptive["pace"]["disabled"]
    assert adaptive["preset"]["label"] == "preset"
    for name in ("paper", "nano"):
        shown = _shown(out[name])
        assert not {"pace", "anchor_quantile"} & set(shown), name
        assert set(TAU_ALPHA + ["delayed", "adaptive"]) <= set(shown), name


def test_custom_follows_its_adaptive_toggle() -> None:
    """custom: the adaptive toggle decides which fields show; everything shown is editable."""
    names = list(policy_fields(LADRPolicy()))
    on = _shown(_apply(preset_table(), names, ["custom"], switch_table(),
                       {"adaptive": True})["custom"])
    assert {"pace", "anchor_quantile"} <= set(on) and not set(TAU_ALPHA) & set(on)
    assert not any(w.get("disabled") for w in on.values())
    off = _shown(_apply(preset_table(), names, ["custom"], switch_table(),
                        {"adaptive": False})["custom"])
    assert set(TAU_ALPHA) <= set(off) and not {"pace", "anchor_quantile"} & set(off)


def test_custom_adaptive_builds_the_rescue_it_shows() -> None:
    """The values the custom widgets show are the policy the node builds; the hidden tau and
    alpha, even if edited before, are not read."""
    from nodes.policy import PolicyFields, build_policy

    fields = {**policy_fields(LADRPolicy()), "adaptive": True, "pace": 2.0,
              "anchor_quantile": 0.25, "tau_structure": 0.7, "alpha_exploration": 0.5}
    policy = build_policy("custom", PolicyFields(**fields))
    assert policy.adaptive == AdaptiveRescue(pace=2.0, anchor_quantile=0.25)
    assert (policy.tau, policy.alpha) == (LADRPolicy().tau, LADRPolicy().alpha)
    off = build_policy("custom", PolicyFields(**{**fields, "adaptive": False}))
    assert off.adaptive is None and off.tau[1] == 0.7
    with pytest.raises(ValueError, match="pace"):
        build_policy("custom", PolicyFields(**{**fields, "pace": -1.0}))


def test_cache_node_fields_follow_its_preset() -> None:
    """The ML-Cache Options node sends the same table shape; the same logic greys its fields."""
    from nodes.cache import FIELDS
    from nodes.cache import preset_table as cache_table

    out = _apply(cache_table(), list(FIELDS), ["ladr", "official", "custom"])
    ladr = {w["name"]: w for w in out["ladr"]}
    assert ladr["refresh_interval"]["value"] == 3 and ladr["warmup_ratio"]["value"] == 0.0
    assert all(ladr[f]["disabled"] for f in FIELDS)
    assert ladr["refresh_interval"]["label"] == "refresh_interval = 3"
    assert {w["name"]: w.get("value") for w in out["official"]}["refresh_interval"] == 5
    assert not any(w.get("disabled") for w in out["custom"] if w["name"] != "preset")
    assert {w["name"]: w.get("value") for w in out["custom"]}["cache_ratio"] == "typed"


REGISTER = """
import { app } from "./scripts/app.js";
await import("./extensions/ComfyUI-LADR/ladr_policy.js");
const [nodeData, names, start] = JSON.parse(process.argv[2]);
const ext = app.extensions[0];
function NodeType() {}
NodeType.prototype.onNodeCreated = function () {};
ext.beforeRegisterNodeDef(NodeType, nodeData);
const node = new NodeType();
node.size = [300, 600];
node.computeSize = () => [300, 20 * node.widgets.filter((w) => !w.hidden).length];
node.setSize = (s) => { node.size = s; };
node.widgets = [{ name: "preset", value: start },
                ...names.map((n) => ({ name: n, value: n === "adaptive" ? false : 0.5 }))];
node.onNodeCreated();
const seen = (tag) => ({ tag, hidden: node.widgets.filter((w) => w.hidden).map((w) => w.name),
                         height: node.size[1] });
const out = [seen("created")];
const toggle = node.widgets.find((w) => w.name === "adaptive");
toggle.value = true; toggle.callback(true); out.push(seen("adaptive on"));
const preset = node.widgets.find((w) => w.name === "preset");
preset.value = "paper"; preset.callback("paper"); out.push(seen("paper"));
console.log(JSON.stringify(out));
"""


def test_extension_rehides_fields_when_the_toggle_or_preset_changes(tmp_path: Path) -> None:
    """web/ladr_policy.js in node against a minimal app stub: on a custom node, turning the
    adaptive toggle on hides tau/alpha/delayed and shows pace/anchor_quantile at once, and the
    node shrinks to its visible widgets; choosing `paper` then hides pace/anchor_quantile."""
    extension_stub(tmp_path)
    (tmp_path / "main.mjs").write_text(REGISTER)
    node_data = {"name": "LADR_Policy", "input": {"required": {"preset": [
        ["custom"], {"ladr_presets": preset_table(), "ladr_switch": switch_table()}]}}}
    names = list(policy_fields(LADRPolicy()))
    proc = subprocess.run(["node", str(tmp_path / "main.mjs"),
                           json.dumps([node_data, names, "custom"])], capture_output=True,
                          text=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    created, on, paper = json.loads(proc.stdout)
    assert set(created["hidden"]) == {"pace", "anchor_quantile"}
    assert set(on["hidden"]) == set(TAU_ALPHA + ["delayed"])
    assert on["height"] == 20 * (len(names) + 1 - len(on["hidden"]))
    assert set(paper["hidden"]) == {"pace", "anchor_quantile"}
