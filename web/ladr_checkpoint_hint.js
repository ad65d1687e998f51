// What a user is told when a workflow's Load DiMOO Model names a checkpoint that is not
// installed (pure logic, testable in node). ComfyUI's own message when Run is pressed says only
// "Load DiMOO Model rejected the value for model_name"; the fix (where the folder goes) was
// three clicks deep. The extension (ladr_checkpoint.js) shows this notice when the workflow
// opens instead.

export const NANO = "dimoo-nano (built-in)";
export const REPOSITORY = "Alpha-VLLM/Lumina-DiMOO";

/** The notice ({ severity, summary, detail }) for a model_name `value` that is not among the
 * combo's `choices`, or null when it is (or nothing is known). `files`: the one-file weight
 * formats, file ending -> what it is called ({".gguf": "GGUF file"}: the schema's
 * `ladr_files`, from the registry of weight formats); any other name is a folder. */
export function missingCheckpoint(value, choices, files = {}) {
  if (typeof value !== "string" || !value || !Array.isArray(choices)) return null;
  if (choices.includes(value)) return null;
  const ending = Object.keys(files ?? {}).find((e) => value.toLowerCase().endsWith(e));
  const where = ending ? `ComfyUI/models/lumina_dimoo/${value}`
    : `ComfyUI/models/lumina_dimoo/${value}/`;
  const what = ending
    ? `Put the ${files[ending]} at ${where} (python -m ladr_core.dimoo.save makes one from ` +
      "the official folder)"
    : `Download the whole Hugging Face repository ${REPOSITORY} into ${where}, keeping its ` +
      `layout (huggingface-cli download ${REPOSITORY} --local-dir <that folder>)`;
  return {
    severity: "warn",
    summary: `Load DiMOO Model: checkpoint '${value}' is not installed`,
    detail: `Run would stop with "Load DiMOO Model rejected the value for model_name". ` +
      `${what}, then press R to refresh; or choose ${NANO}.`,
  };
}
