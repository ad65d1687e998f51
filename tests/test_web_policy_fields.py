"""The LADR Policy node's field logic (web/ladr_policy_fields.js) in node, on the preset table
the node really sends (nodes.policy.preset_table): under a preset the fields show its values and
are disabled and the preset widget names the T it brings; under custom they are editable."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nodes.policy import policy_fields, preset_table

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import { applyFieldState } from "%s";
const [presets, names, choices] = JSON.parse(process.argv[1]);
const out = {};
for (const chosen of choices) {
  const widgets = [{ name: "preset" }, ...names.map((n) => ({ name: n, value: "typed" }))];
  applyFieldState(widgets, presets, chosen);
  out[chosen] = widgets;
}
console.log(JSON.stringify(out));
"""


def _apply(table: dict, names: list[str], choices: list[str]) -> dict[str, list[dict]]:
    """applyFieldState in node for each chosen preset: {choice: the widgets after it}."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    module = (ROOT / "web" / "ladr_policy_fields.js").as_uri()
    proc = subprocess.run(["node", "--input-type=module", "-e", SCRIPT % module,
                           json.dumps([table, names, choices])], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_fields_follow_the_preset() -> None:
    names = list(policy_fields(next(iter(__import__("ladr_core").PRESETS.values())).policy))
    out = _apply(preset_table(), names, ["nano", "paper", "custom"])
    nano = {w["name"]: w for w in out["nano"]}
    assert nano["preset"]["label"] == "preset (brings T = 128)"
    assert nano["tau_structure"]["value"] == 0.9 and nano["seen_only"]["value"] is True
    assert all(w["disabled"] for n, w in nano.items() if n != "preset")
    paper = {w["name"]: w for w in out["paper"]}
    assert paper["preset"]["label"] == "preset" and paper["tau_refinement"]["value"] == -1.0
    # disabled widgets are drawn without their value: the label carries it
    assert paper["tau_structure"]["label"] == "tau_structure = 0.05"
    assert paper["tau_refinement"]["label"] == "tau_refinement = none"
    assert "label" not in nano["seen_only"]  # a toggle draws its own state
    assert nano["metric"]["label"] == "metric = margin"
    custom = {w["name"]: w for w in out["custom"]}
    assert not any(w.get("disabled") for n, w in custom.items() if n != "preset")
    assert not any(w.get("label") for n, w in custom.items() if n != "preset")
    assert custom["tau_structure"]["value"] == "typed"  # custom keeps what the user typed


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
