// Load DiMOO Model: when a workflow opens with a checkpoint that is not installed (the
// real-model templates name Lumina-DiMOO, which is not shipped), say where it goes in a notice
// at once, rather than leave the user ComfyUI's "rejected the value for model_name" on Run.
// The notice's words: ladr_checkpoint_hint.js.
import { app } from "../../scripts/app.js";
import { missingCheckpoint } from "./ladr_checkpoint_hint.js";

const LOADER = "LADR_LoadDiMOOModel";
const LIFE_MS = 20000;
const told = new Map(); // model_name -> when it was told (one notice per name per load)
let files = {}; // the one-file weight formats: the schema's ladr_files on model_name

function check(node) {
  if ((node?.constructor?.comfyClass ?? node?.comfyClass ?? node?.type) !== LOADER) return;
  const widget = node.widgets?.find((w) => w.name === "model_name");
  const notice = missingCheckpoint(widget?.value, widget?.options?.values, files);
  if (!notice) return;
  const now = Date.now();
  if (now - (told.get(widget.value) ?? -Infinity) < 2000) return;
  told.set(widget.value, now);
  app.extensionManager?.toast?.add({ ...notice, life: LIFE_MS });
}

app.registerExtension({
  name: "comfyui-ladr.missing-checkpoint",
  beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData?.name === LOADER) {
      files = nodeData.input?.required?.model_name?.[1]?.ladr_files ?? {};
    }
  },
  loadedGraphNode(node) {
    check(node);
  },
});
