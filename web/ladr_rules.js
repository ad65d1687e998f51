// DiMOO Sampler: the rule widgets (tau, gamma, token) are greyed out unless the chosen
// strategy reads them (nodes/rules.py; logic: ladr_rule_fields.js).
import { app } from "../../scripts/app.js";
import { applyRuleState } from "./ladr_rule_fields.js";

app.registerExtension({
  name: "comfyui-ladr.rule-fields",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData?.name !== "LADR_DiMOOSampler") return;
    const table = nodeData.input?.required?.strategy?.[1]?.ladr_rules ?? null;
    if (!table) return;
    const refresh = (node) => {
      const strategy = node.widgets?.find((w) => w.name === "strategy");
      if (strategy) applyRuleState(node.widgets, table, strategy.value);
      node.setDirtyCanvas?.(true, true);
      const canvas = app.canvas; // re-announce the selection so an open panel greys them too
      if (canvas?.selected_nodes?.[node.id]) canvas.onSelectionChange?.(canvas.selected_nodes);
    };
    const created = nodeType.prototype.onNodeCreated;
    nodeType.prototype.onNodeCreated = function () {
      const out = created?.apply(this, arguments);
      const widget = this.widgets?.find((w) => w.name === "strategy");
      if (widget) {
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
      refresh(this); // a loaded workflow: grey what its strategy does not read
      return out;
    };
  },
});
