// Pure logic of ladr_input_errors.js (no ComfyUI imports, testable in node). ComfyUI 0.33
// attaches the one message a node's validate_inputs returns to EVERY input the function names
// (execution.validate_inputs: one "custom_validation_failed" per input, its details
// "<input> - <message>"). DiMOO Canvas names width and height (nodes/canvas.py), so a width
// off the connected model's grid came back on height too. The pack's messages name the input
// that is wrong first ("DiMOO Canvas: width=50 is off ..."): `onNamedInputs` keeps such a
// message on that input alone.

const PACK = "LADR_"; // the pack's node ids
const HOST_PREFIX = /^[\w.]+ - /; // "<input> - " before the node's own message

/** The input `text` ("<node>: <input>=..." or "<node>: <input> ...") names first, when it is
 * one of `inputs`; else null. */
export function namedInput(text, inputs) {
  const m = /^[^:]*: ([A-Za-z_]\w*)/.exec(text ?? "");
  return m && inputs.includes(m[1]) ? m[1] : null;
}

/** `nodeErrors` (a /prompt answer's node_errors) with each pack message that ComfyUI put on
 * several inputs kept on the one it names; other nodes' and other errors untouched. Changed in
 * place, and returned. */
export function onNamedInputs(nodeErrors) {
  for (const entry of Object.values(nodeErrors ?? {})) {
    if (!String(entry?.class_type ?? "").startsWith(PACK) || !Array.isArray(entry.errors)) continue;
    const text = (e) => String(e?.details ?? "").replace(HOST_PREFIX, "");
    const copies = new Map(); // message -> the inputs it was put on
    for (const e of entry.errors) {
      if (e?.type !== "custom_validation_failed" || !e.extra_info?.input_name) continue;
      copies.set(text(e), [...(copies.get(text(e)) ?? []), e.extra_info.input_name]);
    }
    entry.errors = entry.errors.filter((e) => {
      const inputs = e?.type === "custom_validation_failed" ? copies.get(text(e)) ?? [] : [];
      const named = inputs.length > 1 ? namedInput(text(e), inputs) : null;
      return !named || e.extra_info.input_name === named;
    });
  }
  return nodeErrors;
}
