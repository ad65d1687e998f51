// LADR step map: a canvas widget on the "DiMOO Sampler (LADR)" node (and its legacy twin),
// redrawn on every "ladr.step" event sent by the sampler (nodes/events.py: masks and counters,
// picture is ComfyUI's progress-bar preview). All drawing is in ladr_preview_draw.js.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";
import { drawFrame, shownPayload, trackRun } from "./ladr_preview_draw.js";

const SAMPLERS = new Set(["LADR_DiMOOSampler2", "LADR_DiMOOSampler"]);
const EVENT = "ladr.step";
const CANVAS_W = 320;
const CANVAS_H = 300;

function isSampler(node) {
  return SAMPLERS.has(node?.constructor?.comfyClass ?? node?.comfyClass ?? node?.type);
}

function redraw(state) {
  // Draw at the size the node gives the widget (crisp text, no stretching).
  const { canvas } = state;
  const dpr = window.devicePixelRatio || 1;
  const w = Math.round((canvas.clientWidth || CANVAS_W) * dpr);
  const h = Math.round((canvas.clientHeight || CANVAS_H) * dpr);
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  drawFrame(ctx, state.payload);
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
    getMinHeight: () => 280,
  });
  node.__ladrPreview = { canvas, payload: null, run: null };
  redraw(node.__ladrPreview);
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
  },
  nodeCreated(node) {
    if (isSampler(node)) attach(node);
  },
});
