// What a user is told when a workflow's Load DiMOO Model names a checkpoint that is not
// installed (pure logic, testable in node). ComfyUI's own message when Run is pressed says only
// "Load DiMOO Model rejected the value for model_name"; the fix (where the folder goes) was
// three clicks deep. The extension (ladr_checkpoint.js) shows this notice when the workflow
// opens instead.

export const NANO = "dimoo-nano (built-in)";
export const REPOSITORY = "Alpha-VLLM/Lumina-DiMOO";

/** The notice ({ severity, summary, detail }) for a model_name `value` that is not among the
 * combo's `choices`, or null when it is (or nothing is known). */
export function missingCheckpoint(value, choices) {
  if (typeof value !== "string" || !value || !Array.isArray(choices)) return null;
  if (choices.includes(value)) return null;
  const gguf = value.toLowerCase().endsWith(".gguf");
  const where = gguf ? `ComfyUI/models/lumina_dimoo/${value}`
    : `ComfyUI/models/lumina_dimoo/${value}/`;
  const what = gguf
    ? `Put the GGUF file at ${where} (python -m ladr_core.dimoo.save makes one from the ` +
      "official folder)"
    : `Download the whole Hugging Face repository ${REPOSITORY} into ${where}, keeping its ` +
      `layout (huggingface-cli download ${REPOSITORY} --local-dir <that folder>)`;
  return {
    severity: "warn",
    summary: `Load DiMOO Model: checkpoint '${value}' is not installed`,
    detail: `Run would stop with "Load DiMOO Model rejected the value for model_name". ` +
      `${what}, then press R to refresh; or choose ${NANO}.`,
  };
}
