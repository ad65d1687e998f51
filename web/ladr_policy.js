// LADR Policy and ML-Cache Options nodes: under a preset, grey out the fields (they are not
// used) and show the preset's values (and the policy preset's T), on the node and in the
// right-hand Parameters panel; under "custom" the fields are editable. LADR Policy also hides the fields its rescue does not read (tau, alpha and delayed
// with adaptive rescue on; pace and anchor_quantile with it off), for a preset and for custom
// as its adaptive toggle changes. Logic: ladr_policy_fields.js.
import { app } from "../../scripts/app.js";
import { applyFieldState } from "./ladr_policy_fields.js";

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
      // the right-hand Parameters panel lists a selected node's widgets when the selection
      // changes; re-announce it so an open panel hides and greys what the node now does
      const canvas = app.canvas;
      if (canvas?.selected_nodes?.[node.id]) canvas.onSelectionChange?.(canvas.selected_nodes);
    };
    const created = nodeType.prototype.onNodeCreated;
    nodeType.prototype.onNodeCreated = function () {
      const out = created?.apply(this, arguments);
      for (const name of ["preset", rescueSwitch?.field]) {
        const widget = this.widgets?.find((w) => w.name === name);
        if (!widget) continue;
        const callback = widget.callback;
        widget.callback = (...args) => {
          const r = callback?.apply(widget, args);
          refresh(this);
          return r;
        };
      }
      refresh(this);
      return out;
    };
    const configured = nodeType.prototype.onConfigure;
    nodeType.prototype.onConfigure = function () {
      const out = configured?.apply(this, arguments);
      refresh(this); // a loaded workflow: show what its preset sets
      return out;
    };
  },
});
