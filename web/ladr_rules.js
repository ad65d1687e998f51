// DiMOO Sampler: the rule widgets (tau, gamma, token) are greyed out unless the chosen
// strategy reads them (nodes/rules.py; logic: ladr_rule_fields.js).
import { app } from "../../scripts/app.js";
import { applyRuleState } from "./ladr_rule_fields.js";
import { reannounceSelection, refreshOnChange } from "./ladr_node_hooks.js";

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
      reannounceSelection(app.canvas, node); // an open panel greys them too
    };
    refreshOnChange(nodeType, ["strategy"], refresh);
  },
});
