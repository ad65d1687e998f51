// Pure logic of the LADR Policy node's field widgets (no ComfyUI imports, testable in node).
//
// Under a preset the fields are not used by the node (nodes/policy.py): they show the preset's
// values, greyed out, and the preset widget says which schedule length T the preset brings.
// Under "custom" every field is editable and starts from the values last shown. Fields the
// chosen rescue does not read are hidden: a switch (the `ladr_switch` of the preset widget's
// schema, { field, on: [...], off: [...] }) names the toggle and what each of its states hides.

/** presets: the `ladr_presets` table of the preset widget's schema (nodes/policy.py
 * preset_table); returns { editable, values, label } for the chosen preset. */
export function fieldState(presets, preset) {
  if (preset === "custom" || !presets || !presets[preset]) {
    return { editable: true, values: {}, label: "preset" };
  }
  const entry = presets[preset];
  return { editable: false, values: { ...entry.fields }, label: "preset" };
}

/** A preset's field value as a label shows it: tau's "no threshold" (-1) as "-1 (none)", so
 * the label agrees with the number the Parameters panel draws beside it. */
export function shownValue(name, value) {
  if (name.startsWith("tau_") && Number(value) < 0) return `${Number(value)} (none)`;
  if (typeof value === "number") return String(Number(value.toPrecision(4)));
  return String(value);
}

/** The field names to hide: switch.on when the switch field's value is true, else switch.off
 * (none without a switch). values: { name: value } as the widgets show them now. */
export function hiddenFields(rescueSwitch, values) {
  if (!rescueSwitch || !(rescueSwitch.field in values)) return [];
  return [...(values[rescueSwitch.field] === true ? rescueSwitch.on : rescueSwitch.off)];
}

/** What the Parameters panel reads from a widget's options: disabled, hidden, and under a
 * preset no `min` (kept as `ladrMin`), so the panel draws the number as a plain greyed value
 * instead of a half-filled bar (the bar's fill needs min, max and step); custom puts it back. */
export function panelOptions(options, disabled, hidden) {
  Object.assign(options, { disabled, hidden });
  if (disabled && "min" in options) {
    options.ladrMin = options.min;
    delete options.min;
  } else if (!disabled && "ladrMin" in options) {
    options.min = options.ladrMin;
    delete options.ladrMin;
  }
  return options;
}

/** Apply fieldState to LiteGraph-style widgets ({ name, value, disabled, label, hidden,
 * options }). The canvas draws a disabled number or combo widget without its value, so under a
 * preset the value goes into the label ("tau_structure = 0.9"); under custom the label is the
 * plain name again. Toggles draw their state even when disabled and keep their plain name.
 * The right-hand Parameters panel (frontend 1.49) reads `options.disabled` and
 * `options.hidden`, not the widget's own `hidden`: both are mirrored there, so the panel greys
 * and hides what the node does. */
export function applyFieldState(widgets, presets, preset, rescueSwitch = null) {
  const state = fieldState(presets, preset);
  for (const w of widgets) {
    if (w.name === "preset") {
      w.label = state.label;
      continue;
    }
    if (w.name in state.values) w.value = state.values[w.name];
    w.disabled = !state.editable;
    const drawsItsValue = typeof w.value === "boolean"; // a toggle shows its state anyway
    w.label = state.editable || drawsItsValue ? undefined
      : `${w.name} = ${shownValue(w.name, w.value)}`;
  }
  const shown = Object.fromEntries(widgets.map((w) => [w.name, w.value]));
  const hidden = new Set(hiddenFields(rescueSwitch, shown));
  for (const w of widgets) {
    if (w.name === "preset") continue;
    w.hidden = hidden.has(w.name);
    // frontend 1.49 keeps a widget's state in a reactive store (widget._state, its options
    // included): a write through it is one the open panel sees; the raw options otherwise
    const options = w._state?.options ?? w.options;
    if (options) panelOptions(options, Boolean(w.disabled), w.hidden);
  }
  return { ...state, hidden: [...hidden] };
}
