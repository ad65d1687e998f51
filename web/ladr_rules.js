// DiMOO Sampling Rule (and the legacy DiMOO Sampler's own widgets): the rule widgets (tau,
// gamma, token) are greyed out unless the chosen strategy reads them (nodes/rules.py; logic:
// ladr_rule_fields.js).
import { app } from "../../scripts/app.js";
import { applyRuleState } from "./ladr_rule_fields.js";
import { reannounceSelection, refreshOnChange } from "./ladr_node_hooks.js";

const NODES = new Set(["LADR_SamplingRule", "LADR_DiMOOSampler"]);

app.registerExtension({
  name: "comfyui-ladr.rule-fields",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (!NODES.has(nodeData?.name)) return;
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
