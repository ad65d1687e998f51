// LADR Policy and ML-Cache Options nodes: under a preset, grey out the fields (they are not
// used) and show the preset's values (and the policy preset's T); under "custom" the fields are
// editable. Logic: ladr_policy_fields.js.
import { app } from "../../scripts/app.js";
import { applyFieldState } from "./ladr_policy_fields.js";

const NODES = new Set(["LADR_Policy", "LADR_MLCacheOptions"]);

app.registerExtension({
  name: "comfyui-ladr.policy-fields",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (!NODES.has(nodeData?.name)) return;
    const presets = nodeData.input?.required?.preset?.[1]?.ladr_presets ?? null;
    const refresh = (node) => {
      const preset = node.widgets?.find((w) => w.name === "preset");
      if (preset) applyFieldState(node.widgets, presets, preset.value);
      node.setDirtyCanvas?.(true, true);
    };
    const created = nodeType.prototype.onNodeCreated;
    nodeType.prototype.onNodeCreated = function () {
      const out = created?.apply(this, arguments);
      const preset = this.widgets?.find((w) => w.name === "preset");
      if (preset) {
        const callback = preset.callback;
        preset.callback = (...args) => {
          const r = callback?.apply(preset, args);
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
