// Pure drawing logic of the LADR step map (no ComfyUI imports, testable in a bare page).
//
// planFrame(payload, width, height) -> list of plain draw ops; a pure function of the
// "ladr.step" payload (see nodes/events.py for its keys): which tokens are decoded, still
// masked, or rescued this step, and the counters. The picture itself is ComfyUI's progress-bar
// preview on the node (one preview channel); this map shows what LADR did.
// drawFrame(ctx, payload) executes the plan on a 2D canvas context.

export const COLORS = {
  background: "#1b1b1f",
  text: "#e8e8ec",
  muted: "#9a9aa6",
  decoded: "#4a6fa5", // tokens already decoded
  masked: "#2a2a30", // tokens still masked
  rescued: "#ffc400", // tokens rescued this step
  rescuedRun: "#8fb4e6", // final frame: tokens LADR's rescue decoded during the run
  done: "#7bd88f",
  // final frame of a run without rescues: when each token was decoded, by quarter of the run
  order: ["#223a5e", "#3b5f94", "#6f95cc", "#b6cff0"],
};

export const HEADER = 22;
export const FOOTER = 20;
export const LINE = 16; // one more line of 12 px text

/** base64 of np.packbits (MSB first) -> Uint8Array of n 0/1 values. */
export function decodeBits(b64, n) {
  const out = new Uint8Array(n);
  if (!b64) return out;
  const raw = atob(b64);
  for (let i = 0; i < n; i++) {
    const byte = raw.charCodeAt(i >> 3);
    out[i] = (byte >> (7 - (i & 7))) & 1;
  }
  return out;
}

/** base64 of little-endian uint16 values (nodes/events.py RunMap) -> Uint16Array of n. */
export function decodeUint16(b64, n) {
  const out = new Uint16Array(n);
  if (!b64) return out;
  const raw = atob(b64);
  for (let i = 0; i < n && 2 * i + 1 < raw.length; i++) {
    out[i] = raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8);
  }
  return out;
}

/** Height of the text above the grid: one line, two for a restored run (its "from the run
 * at" line). */
export function headerHeight(payload) {
  return payload?.restored ? HEADER + LINE : HEADER;
}

/** Largest rectangle with the grid's aspect ratio inside the area below the header. */
export function fitRect(grid, width, height, top = HEADER, bottom = FOOTER) {
  const [gh, gw] = grid;
  const areaH = Math.max(1, height - top - bottom);
  const scale = Math.min(width / gw, areaH / gh);
  const w = gw * scale;
  const h = gh * scale;
  return { x: (width - w) / 2, y: top + (areaH - h) / 2, w, h, cell: scale };
}

/** "s" unless the count is 1: "1 pass", "2 passes" (plural(1, "pass", "passes")). */
export function plural(count, one, many) {
  return `${count} ${Number(count) === 1 ? one : many}`;
}

/** "08:12:03" (the browser's locale) of the Unix seconds a run finished at. */
export function clockTime(seconds) {
  return new Date(Number(seconds) * 1000).toLocaleTimeString([], {
    hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** The step map of a finished run from the sampler's record (its final event, kept by
 * ComfyUI as the node's UI output "ladr_step_map" and in the node's properties): drawn as
 * its final frame, with the line saying when it ran and, for a run ComfyUI served from its
 * cache, "cached:". */
export function restoredPayload(record, cached) {
  if (!record || !record.grid) return null;
  const n = record.grid[0] * record.grid[1];
  return { ...record, restored: true, cached: Boolean(cached),
           rescued_run: Array.from(decodeBits(record.rescued_run_bits, n)),
           decode_order: Array.from(decodeUint16(record.decode_order_b64, n)) };
}

function restoredLine(p) {
  const when = p.finished_at != null ? `from the run at ${clockTime(p.finished_at)}` : "from the last run";
  return p.cached ? `cached: ${when}` : when;
}

/** The line above the map mid-run; LADR's phase only where the strategy has one (the
 * payload says "n/a" otherwise: the official sampler, Prophet). */
export function counterText(p) {
  const pct = Number(p.masked_pct ?? 0).toFixed(1);
  const done = Math.round(100 * Number(p.progress ?? 0));
  const phase = p.phase && p.phase !== "n/a" ? ` · ${p.phase}` : "";
  return `step ${p.step ?? 0}/${p.steps ?? 0}${phase} · masked ${pct}% · NFE ${p.nfe ?? 0} · ${done}%`;
}

/** The line below the map mid-run: what this step decoded. The official sampler (baseline)
 * rescues nothing by design, so it says how many tokens its schedule decoded instead. */
export function stepText(p) {
  if (p.strategy === "baseline") {
    return `${plural(p.unmasked ?? 0, "token", "tokens")} decoded this step (official sampler)`;
  }
  return `${p.rescued ?? 0} rescued this step (${p.strategy ?? ""})`;
}

/** Final lines: steps run of the schedule's T (and where a T not from the steps widget came
 * from), then forward passes per image against the official sampler's for the same job
 * (nodes/run_stats.py), time, ML-Cache saving. Two lines: one would not fit the widget. */
export function statsLines(s, scheduleSteps) {
  const planned = s.steps_planned ?? scheduleSteps;
  const of = planned ? ` of ${planned}` : "";
  const passes = Number(s.nfe_per_image ?? s.nfe);
  const shown = (v) => (Math.abs(v - Math.round(v)) < 0.05 ? v.toFixed(0) : v.toFixed(1));
  const official = s.official_nfe_per_image;
  const versus = official != null && !(s.strategy === "baseline" && planned === s.official_steps)
    ? ` (official ${shown(Number(official))})` : "";
  const saved = Number(s.forwards_saved_pct ?? 0);
  const cache = saved > 0 ? ` · cache saved ${saved.toFixed(0)}%` : "";
  const steps = !planned ? plural(s.steps, "step", "steps") : `${s.steps}${of} steps`;
  return [`done: ${steps}`, `${plural(shown(passes), "pass", "passes")}${versus} · ` +
    `${Number(s.seconds).toFixed(2)} s${cache}`];
}

/** statsLines as one line (the text a test or a log reads). */
export function statsText(s, scheduleSteps) {
  return statsLines(s, scheduleSteps).join(" · ");
}

/** Height of the text below the grid: two lines of stats on the final frame. */
export function footerHeight(payload) {
  return payload?.done && payload?.stats ? FOOTER + LINE : FOOTER;
}

/** One rect per run of equal bits along a row: few ops even for a 64x64 grid. */
function runs(bits, grid, rect, fill) {
  const [gh, gw] = grid;
  const ops = [];
  for (let r = 0; r < gh; r++) {
    let c = 0;
    while (c < gw) {
      if (!bits[r * gw + c]) { c++; continue; }
      const start = c;
      while (c < gw && bits[r * gw + c]) c++;
      ops.push({ op: "rect", x: rect.x + start * rect.cell, y: rect.y + r * rect.cell,
                 w: (c - start) * rect.cell, h: rect.cell, fill });
    }
  }
  return ops;
}

/** The run so far, updated with one payload (pure: returns a new state): its rescue map and
 * the step at which each token was first seen decoded (0: not yet). A payload at step 1, or
 * on another grid, starts a new run. */
export function trackRun(run, payload) {
  if (!payload || !payload.grid) return run;
  const n = payload.grid[0] * payload.grid[1];
  const fresh = !run || run.n !== n || payload.step === 1;
  const bits = fresh ? new Uint8Array(n) : run.bits.slice();
  const order = fresh ? new Uint16Array(n) : run.order.slice();
  const now = decodeBits(payload.rescued_bits, n);
  const masked = decodeBits(payload.masked_bits, n);
  for (let i = 0; i < n; i++) {
    bits[i] |= now[i];
    if (!masked[i] && order[i] === 0) order[i] = Number(payload.step) || 1;
  }
  return { n, bits, order };
}

/** What drawFrame gets: the payload, and on the final event the run's rescue map and decode
 * order too. */
export function shownPayload(run, payload) {
  if (!payload || !payload.done || !run) return payload;
  return { ...payload, rescued_run: Array.from(run.bits), decode_order: Array.from(run.order) };
}

/** Last frame (every token decoded): the cells the run's rescue decoded, lighter, with their
 * count; for a run without rescues, the cells shaded by the quarter of the run in which they
 * were decoded (darker = earlier). null when there is nothing to tell apart. */
function finalMap(payload, grid, rect, n) {
  const rescued = payload.rescued_run ?? [];
  const count = rescued.reduce((a, b) => a + b, 0);
  if (count > 0) {
    return { ops: runs(rescued, grid, rect, COLORS.rescuedRun),
             header: `${count} of ${n} tokens decoded by rescue (light cells)` };
  }
  const order = payload.decode_order ?? [];
  const last = order.reduce((a, b) => Math.max(a, b), 0);
  if (last < 2) return null; // decoded in one step: nothing to tell apart
  const ops = [];
  COLORS.order.forEach((fill, band) => {
    const bits = order.map((s) => (s > 0 && Math.min(3, Math.floor((4 * (s - 1)) / last)) === band ? 1 : 0));
    ops.push(...runs(bits, grid, rect, fill));
  });
  return { ops, header: `decode order, darker = earlier (steps 1-${last})` };
}

/** payload -> draw ops (pure). On the final frame (every token decoded) the cells LADR's
 * rescue decoded during the run are lighter, and the header counts them; a run without
 * rescues (the official sampler, Prophet) shows its decode order instead. */
export function planFrame(payload, width, height) {
  const ops = [{ op: "rect", x: 0, y: 0, w: width, h: height, fill: COLORS.background }];
  if (!payload || !payload.grid) {
    ops.push({ op: "text", x: 6, y: 15, text: "LADR step map: waiting for a run", color: COLORS.muted });
    return ops;
  }
  const grid = payload.grid;
  const n = grid[0] * grid[1];
  const top = headerHeight(payload);
  const rect = fitRect(grid, width, height, top, footerHeight(payload));
  ops.push({ op: "rect", x: rect.x, y: rect.y, w: rect.w, h: rect.h, fill: COLORS.decoded });
  ops.push(...runs(decodeBits(payload.masked_bits, n), grid, rect, COLORS.masked));
  const final = payload.done ? finalMap(payload, grid, rect, n) : null;
  ops.push(...(final ? final.ops
    : runs(decodeBits(payload.rescued_bits, n), grid, rect, COLORS.rescued)));
  if (payload.restored) {
    ops.push({ op: "text", x: 6, y: 15, text: restoredLine(payload), color: COLORS.muted });
  }
  ops.push({ op: "text", x: 6, y: top - 7, text: final ? final.header : counterText(payload),
             color: COLORS.text });
  const bottom = height - 6;
  if (payload.done && payload.stats) {
    const [first, second] = statsLines(payload.stats, payload.steps);
    ops.push({ op: "text", x: 6, y: bottom - LINE, text: first, color: COLORS.done });
    ops.push({ op: "text", x: 6, y: bottom, text: second, color: COLORS.done });
  } else {
    ops.push({ op: "text", x: 6, y: bottom, color: COLORS.rescued, text: stepText(payload) });
  }
  return ops;
}

/** Execute planFrame's ops on a CanvasRenderingContext2D. */
export function drawFrame(ctx, payload) {
  const { width, height } = ctx.canvas;
  const ops = planFrame(payload, width, height);
  ctx.save();
  ctx.imageSmoothingEnabled = false; // token cells stay crisp
  ctx.font = "12px sans-serif";
  for (const o of ops) {
    if (o.op === "rect") {
      ctx.fillStyle = o.fill;
      ctx.fillRect(o.x, o.y, o.w, o.h);
    } else if (o.op === "text") {
      ctx.fillStyle = o.color;
      ctx.fillText(o.text, o.x, o.y, width - 12);
    }
  }
  ctx.restore();
  return ops;
}
