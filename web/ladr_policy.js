// LADR Policy and ML-Cache Options nodes: under a preset, grey out the fields (they are not
// used) and show the preset's values (and the policy preset's T), on the node and in the
// right-hand Parameters panel; under "custom" the fields are editable. LADR Policy also hides the fields its rescue does not read (tau, alpha and delayed
// with adaptive rescue on; pace and anchor_quantile with it off), for a preset and for custom
// as its adaptive toggle changes. Logic: ladr_policy_fields.js.
import { app } from "../../scripts/app.js";
import { applyFieldState } from "./ladr_policy_fields.js";
import { reannounceSelection, refreshOnChange } from "./ladr_node_hooks.js";

const NODES = new Set(["LADR_Policy", "LADR_MLCacheOptions"]);

app.registerExtension({
  name: "comfyui-ladr.policy-fields",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (!NODES.has(nodeData?.name)) return;
    const options = nodeData.input?.required?.preset?.[1] ?? {};
    const presets = options.ladr_presets ?? null;
    const rescueSwitch = options.ladr_switch ?? null;
    const refresh = (node) => {
      const preset = node.widgets?.find((w) => w.name === "preset");
      if (preset) applyFieldState(node.widgets, presets, preset.value, rescueSwitch);
      if (node.computeSize && node.setSize) { // hidden widgets take no room
        node.setSize([node.size[0], node.computeSize()[1]]);
      }
      node.setDirtyCanvas?.(true, true);
      reannounceSelection(app.canvas, node);
    };
    refreshOnChange(nodeType, ["preset", rescueSwitch?.field], refresh);
  },
});
