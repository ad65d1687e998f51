// Pure logic of the rule widgets (tau, gamma, token; nodes/rules.py) of DiMOO Sampling Rule and
// the legacy DiMOO Sampler, testable in node: the widgets the chosen strategy does not read are
// greyed out, on the node and in the right-hand Parameters panel. The table is the `ladr_rules` of the strategy widget's schema
// (nodes/rules.applies_table): strategy -> the rule widgets it reads.
import { panelOptions } from "./ladr_policy_fields.js";

/** The rule widgets `strategy` does not read (every rule widget the table names). */
export function unusedRuleWidgets(table, strategy) {
  const read = new Set(table?.[strategy] ?? []);
  const all = new Set(Object.values(table ?? {}).flat());
  return [...all].filter((name) => !read.has(name)).sort();
}

/** Grey out (disabled, also in the panel's options) the rule widgets `strategy` does not
 * read and enable the ones it reads; other widgets are left alone. Returns the greyed names. */
export function applyRuleState(widgets, table, strategy) {
  const all = new Set(Object.values(table ?? {}).flat());
  const unused = new Set(unusedRuleWidgets(table, strategy));
  for (const w of widgets) {
    if (!all.has(w.name)) continue;
    w.disabled = unused.has(w.name);
    const options = w._state?.options ?? w.options;
    if (options) panelOptions(options, w.disabled, Boolean(w.hidden));
  }
  return [...unused];
}
