// DiMOO Canvas (and the legacy DiMOO Sampler's own size widgets): width and height step on the
// token grid of the model the node is connected to, so an artist can type every size that
// model draws (dimoo-nano: 4 px) and none it cannot (Lumina-DiMOO 8B: 16 px). The grids come
// from Load DiMOO Model's schema (`ladr_grids` on model_name: choice -> px per token side, read
// from each checkpoint's VQ config, nodes/loader.grid_table); a model not known there, or none
// connected, keeps the schema's 16 px step (a size every model draws). A size already off the
// grid (a workflow file, a model switched) is left as it is: DiMOO Canvas refuses it, naming
// the input and the connected model's grid, before the model loads (nodes/canvas.py).
import { app } from "../../scripts/app.js";

const LOADER = "LADR_LoadDiMOOModel";
const CANVAS = "LADR_Canvas";
const LEGACY = "LADR_DiMOOSampler"; // its own width / height and model input
const SIZES = ["width", "height"];
let grids = {}; // model_name choice -> px per token side

function typeOf(node) {
  return node?.constructor?.comfyClass ?? node?.comfyClass ?? node?.type;
}

/** The model_name of the Load DiMOO Model feeding `node`'s model input (through nodes that
 * pass a model on, such as Compile DiMOO), or null. */
function modelName(node) {
  for (let hops = 0; node && hops < 8; hops++) {
    if (typeOf(node) === LOADER) return node.widgets?.find((w) => w.name === "model_name")?.value ?? null;
    const slot = node.findInputSlot?.("model") ?? -1;
    node = slot >= 0 ? node.getInputNode?.(slot) : null;
  }
  return null;
}

/** Pixels per token side of the model `node` draws with (a canvas: its samplers'; the legacy
 * sampler: its own), or null when none is known. Several models: the step all of them draw. */
export function connectedGrid(node) {
  const users = typeOf(node) === CANVAS ? node.getOutputNodes?.(0) ?? [] : [node];
  const found = users.map((n) => grids[modelName(n)]).filter((g) => Number.isInteger(g) && g > 0);
  if (!found.length) return null;
  const gcd = (a, b) => (b ? gcd(b, a % b) : a);
  return found.reduce((a, b) => (a * b) / gcd(a, b)); // their least common multiple
}

/** Set the size widgets' step (the frontend rounds a typed value to options.step2) to `grid`,
 * or back to the schema's step; returns whether anything changed. */
export function applyGrid(node, grid) {
  let changed = false;
  for (const w of node.widgets ?? []) {
    if (!SIZES.includes(w.name) || !w.options) continue;
    w.options.ladrSchemaStep ??= w.options.step2 ?? 16;
    const step = grid ?? w.options.ladrSchemaStep;
    if (w.options.step2 !== step) {
      w.options.step2 = step;
      w.options.step = 10 * step; // the arrows' step, as the frontend sets it for an INT
      changed = true;
    }
  }
  return changed;
}

app.registerExtension({
  name: "comfyui-ladr.canvas-grid",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData?.name === LOADER) {
      grids = nodeData.input?.required?.model_name?.[1]?.ladr_grids ?? {};
    }
    if (nodeData?.name !== CANVAS && nodeData?.name !== LEGACY) return;
    // checked each time the node is drawn (a few link look-ups): follows a new link, another
    // model_name or a loaded workflow without a hook on each
    const drawn = nodeType.prototype.onDrawForeground;
    nodeType.prototype.onDrawForeground = function () {
      applyGrid(this, connectedGrid(this));
      return drawn?.apply(this, arguments);
    };
  },
});
