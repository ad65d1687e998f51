// DiMOO Sampler's title follows its rule: a sampler titled after a strategy ("DiMOO Sampler
// (ladr-global)", as the templates name it) takes the strategy its connected DiMOO Sampling
// Rule now has, so a template switched to another strategy does not keep the old name. A title
// whose brackets hold anything but a strategy name (the user's own) is left alone.
import { app } from "../../scripts/app.js";

const SAMPLER = "LADR_DiMOOSampler2";
const RULE = "LADR_SamplingRule";
const TITLED = /^(.*)\(([^()]+)\)$/; // "<name> (<strategy>)"

/** The title `title` with its strategy replaced by `strategy`, or null when the title names no
 * strategy among `strategies` or already names this one (pure, testable). */
export function followedTitle(title, strategy, strategies) {
  const m = TITLED.exec(String(title ?? ""));
  if (!m || !strategy || !strategies.includes(m[2]) || m[2] === strategy) return null;
  return `${m[1]}(${strategy})`;
}

function follow(node) {
  const slot = node.findInputSlot?.("rule") ?? -1;
  const rule = slot >= 0 ? node.getInputNode?.(slot) : null;
  const type = rule?.constructor?.comfyClass ?? rule?.comfyClass ?? rule?.type;
  if (type !== RULE) return;
  const widget = rule.widgets?.find((w) => w.name === "strategy");
  const title = followedTitle(node.title, widget?.value, widget?.options?.values ?? []);
  if (title) {
    node.title = title;
    node.setDirtyCanvas?.(true, true);
  }
}

app.registerExtension({
  name: "comfyui-ladr.sampler-title",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData?.name !== SAMPLER) return;
    const drawn = nodeType.prototype.onDrawForeground; // each frame: a link or strategy change
    nodeType.prototype.onDrawForeground = function () {
      follow(this);
      return drawn?.apply(this, arguments);
    };
  },
});
