// LADR step map: a canvas widget on the "DiMOO Sampler (LADR)" node (and its legacy twin),
// redrawn on every "ladr.step" event sent by the sampler (nodes/events.py: masks and counters,
// picture is ComfyUI's progress-bar preview). All drawing is in ladr_preview_draw.js.
//
// A finished run outlives the page's state: the sampler returns its final event as the UI
// output "ladr_step_map", which ComfyUI sends again ("executed") for a run served from its
// cache and keeps per workflow tab (app.nodeOutputs); the widget also keeps it in the node's
// properties (PROPERTY), saved with the workflow, so a page reload shows it too.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";
import { drawFrame, restoredPayload, shownPayload, trackRun } from "./ladr_preview_draw.js";

const SAMPLERS = new Set(["LADR_DiMOOSampler2", "LADR_DiMOOSampler"]);
const EVENT = "ladr.step";
const CANVAS_W = 320;
const CANVAS_H = 300;
const OUTPUT = "ladr_step_map"; // the sampler's UI output (nodes/handles.step_map_ui)
const PROPERTY = "ladr_last_run";
const cachedNodes = new Map(); // prompt id -> ids of the nodes ComfyUI served from its cache

function isSampler(node) {
  return SAMPLERS.has(node?.constructor?.comfyClass ?? node?.comfyClass ?? node?.type);
}

function redraw(state) {
  // Draw at the size the node gives the widget (crisp text, no stretching). A canvas not laid
  // out yet (a workflow configured before its widget is on the page: a tab switched back, a
  // reload) has no size: it keeps its bitmap, and the ResizeObserver redraws it once laid out.
  const { canvas } = state;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.clientWidth && canvas.clientHeight) {
    const w = Math.round(canvas.clientWidth * dpr);
    const h = Math.round(canvas.clientHeight * dpr);
    if (canvas.width !== w || canvas.height !== h) {
      canvas.width = w;
      canvas.height = h;
    }
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  drawFrame(ctx, state.payload);
}

/** Whether a laid-out canvas's bitmap is not the size it is shown at. */
function stale(canvas) {
  const dpr = window.devicePixelRatio || 1;
  return Boolean(canvas.clientWidth && canvas.clientHeight) &&
    (canvas.width !== Math.round(canvas.clientWidth * dpr) ||
     canvas.height !== Math.round(canvas.clientHeight * dpr));
}

function attach(node) {
  const canvas = document.createElement("canvas");
  canvas.width = CANVAS_W;
  canvas.height = CANVAS_H;
  canvas.style.width = "100%";
  canvas.style.height = "100%";
  canvas.dataset.ladrPreview = "1";
  node.addDOMWidget("ladr_preview", "ladr_preview", canvas, {
    serialize: false,
    hideOnZoom: false,
    hideInPanel: true, // a picture, not a setting: not listed in the Parameters panel
    getMinHeight: () => 280,
  });
  const state = { canvas, payload: null, run: null };
  node.__ladrPreview = state;
  // any change of the widget's laid-out size (first layout, a tab shown again, the node
  // resized) draws the map again at its true aspect
  if (typeof ResizeObserver === "function") new ResizeObserver(() => redraw(state)).observe(canvas);
  redraw(state);
  const configure = node.onConfigure;
  node.onConfigure = function () {
    const out = configure?.apply(this, arguments);
    restoreFrom(this, this.properties?.[PROPERTY], false); // a loaded workflow or tab
    return out;
  };
  const drawn = node.onDrawForeground;
  node.onDrawForeground = function () {
    const out = drawn?.apply(this, arguments);
    const state = this.__ladrPreview;
    if (state && !state.payload) { // a tab switched back: ComfyUI restored its outputs
      restoreFrom(this, app.nodeOutputs?.[String(this.id)]?.[OUTPUT]?.[0], false);
    } else if (state && stale(state.canvas)) {
      redraw(state); // laid out at another size than its bitmap's (no resize seen)
    }
    return out;
  };
}

/** Show a finished run's record (the sampler's final event) and keep it in the node's
 * properties; cached: ComfyUI served this run from its cache. */
function restoreFrom(node, record, cached) {
  const state = node.__ladrPreview;
  const payload = restoredPayload(record, cached);
  if (!state || !payload) return;
  showPreview(node, record.preview);
  state.payload = payload;
  state.run = null;
  keep(node, record);
  redraw(state);
  node.setDirtyCanvas?.(true, false);
}

function onExecuted(event) {
  const { node: id, output, prompt_id: prompt } = event.detail ?? {};
  const record = output?.[OUTPUT]?.[0];
  const node = findNode(id);
  if (!record || !node?.__ladrPreview) return;
  const cached = cachedNodes.get(prompt)?.has(String(id)) ?? false;
  if (cached || !node.__ladrPreview.payload?.done) restoreFrom(node, record, cached);
  else keep(node, record);
}

/** The run's last preview (a file in ComfyUI's temp folder) as the node's image, where the
 * frontend shows none (a reloaded page): ComfyUI's own node outputs, as "executed" sets them. */
function showPreview(node, image) {
  const id = String(node.id);
  if (!image || app.nodeOutputs?.[id]?.images?.length) return;
  try {
    app.nodeOutputs = { ...(app.nodeOutputs ?? {}), [id]: { ...(app.nodeOutputs?.[id] ?? {}),
                                                          images: [image] } };
  } catch (err) {
    console.warn("LADR step map: the last preview could not be shown", err);
  }
}

/** The record in the node's properties, and the workflow told it changed, so that its saved
 * draft (what a page reload restores) holds it. */
function keep(node, record) {
  if (node.properties?.[PROPERTY] === record) return;
  node.properties = { ...(node.properties ?? {}), [PROPERTY]: record };
  const tracker = app.extensionManager?.workflow?.activeWorkflow?.changeTracker;
  // captureCanvasState: frontend 1.49's name for checkState (deprecated there, with a warning)
  if (typeof tracker?.captureCanvasState === "function") tracker.captureCanvasState();
  else tracker?.checkState?.();
}

/** A new run starts: no map says "cached" any more (a run that then fails leaves the last
 * map as "from the run at ...", not as what this run served). */
function onStart() {
  for (const node of app.graph?._nodes ?? []) {
    const state = node.__ladrPreview;
    if (!state?.payload?.cached) continue;
    state.payload = { ...state.payload, cached: false };
    redraw(state);
    node.setDirtyCanvas?.(true, false);
  }
}

function onCached(event) {
  const { nodes, prompt_id: prompt } = event.detail ?? {};
  cachedNodes.clear(); // only the latest prompt's
  cachedNodes.set(prompt, new Set((nodes ?? []).map(String)));
}

function findNode(id) {
  const graph = app.graph;
  if (!graph || id == null) return null;
  const numeric = Number(id);
  return graph.getNodeById(Number.isNaN(numeric) ? id : numeric) ?? null;
}

function onStep(event) {
  const payload = event.detail;
  const node = findNode(payload?.node);
  const state = node?.__ladrPreview;
  if (!state) return;
  state.run = trackRun(state.run, payload);
  state.payload = shownPayload(state.run, payload);
  redraw(state);
  node.setDirtyCanvas?.(true, false);
}

app.registerExtension({
  name: "comfyui-ladr.live-preview",
  setup() {
    api.addEventListener(EVENT, onStep);
    api.addEventListener("executed", onExecuted);
    api.addEventListener("execution_cached", onCached);
    api.addEventListener("execution_start", onStart);
  },
  nodeCreated(node) {
    if (isSampler(node)) attach(node);
  },
});
