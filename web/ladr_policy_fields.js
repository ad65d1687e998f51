// Pure logic of the LADR Policy node's field widgets (no ComfyUI imports, testable in node).
//
// Under a preset the fields are not used by the node (nodes/policy.py): they show the preset's
// values, greyed out, and the preset widget says which schedule length T the preset brings.
// Under "custom" every field is editable and starts from the values last shown.

/** presets: the `ladr_presets` table of the preset widget's schema (nodes/policy.py
 * preset_table); returns { editable, values, label } for the chosen preset. */
export function fieldState(presets, preset) {
  if (preset === "custom" || !presets || !presets[preset]) {
    return { editable: true, values: {}, label: "preset" };
  }
  const entry = presets[preset];
  const label = entry.steps ? `preset (brings T = ${entry.steps})` : "preset";
  return { editable: false, values: { ...entry.fields }, label };
}

/** Apply fieldState to LiteGraph-style widgets ({ name, value, disabled, label }). */
export function applyFieldState(widgets, presets, preset) {
  const state = fieldState(presets, preset);
  for (const w of widgets) {
    if (w.name === "preset") {
      w.label = state.label;
      continue;
    }
    if (w.name in state.values) w.value = state.values[w.name];
    w.disabled = !state.editable;
  }
  return state;
}
