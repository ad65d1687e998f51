// Issue 63 in the REAL ComfyUI frontend, for tests/web/test_web_artist_views.py:
//   node tests/web/artist_views.mjs <url> <out_dir> <text_to_image.json>
// On the nano text-to-image template (1600 x 1000 window): what DiMOO Canvas's width widget
// makes of a typed 52 and 50 (the frontend's own rounding, widget.setValue); a run, then the
// step map's bitmap against its laid-out box after the run, a tab switch and a reload; the
// same prompt again (served from ComfyUI's cache: "cached"), then 2048 x 48 (too many tokens,
// refused when the sampler runs): the step map's words after that failed run, then the width
// its message names; a width of 50 (as a workflow file can hold) with Load DiMOO Model's dtype
// changed, so that it would run again: the server's answer, what the frontend draws on DiMOO
// Canvas and which nodes ran; a width of 52 (the next good run); the rule switched to
// baseline: the sampler's title and the step map's words mid-run; the Parameters panel of the
// sampler; every console warning. Writes <out_dir>/summary.json and screenshots
// (map_<when>.png, bad_width.png, bad_width_canvas.png, bad_width_details.png,
// panel.png).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { drawnErrors, nodeBox, queueAnswer, withComfyPage } from "./comfy_page.mjs";

const [url, outDir, file] = process.argv.slice(2);
const WINDOW = { width: 1600, height: 1000 };
const summary = { steps: null, maps: {}, runs: {}, warnings: [], failed: [] };

async function listen(page) {
  await page.evaluate(() => {
    const api = window.comfyAPI.api.api;
    window.__ladr = { done: [], errors: [], executing: [], steps: [] };
    api.addEventListener("execution_success", (e) => window.__ladr.done.push(e.detail));
    api.addEventListener("execution_error", (e) => window.__ladr.errors.push(e.detail));
    api.addEventListener("executing", (e) => window.__ladr.executing.push(
      e.detail == null ? null : String(e.detail?.node ?? e.detail)));
    api.addEventListener("ladr.step", (e) => window.__ladr.steps.push(e.detail));
  });
}

/** Queue the workflow as shown; what the server answered (a refusal: its answer and what the
 * frontend draws on DiMOO Canvas), every node that ran, the errors. */
async function queue(page, name) {
  await page.evaluate(() => Object.assign(window.__ladr,
                                          { done: [], errors: [], executing: [], steps: [] }));
  const { status, body } = await queueAnswer(page);
  if (status === 200) {
    await page.waitForFunction(() => window.__ladr.done.length + window.__ladr.errors.length > 0,
                               null, { timeout: 300000 });
  }
  await page.waitForTimeout(1500);
  summary.runs[name] = await page.evaluate(() => {
    const { done, errors, executing, steps } = window.__ladr;
    return { done: done.length, executing: executing.filter(Boolean), steps,
             errors: errors.map((e) => ({ node: String(e.node_id ?? ""), type: e.node_type ?? null,
                                          message: e.exception_message ?? "" })) };
  });
  Object.assign(summary.runs[name], { status, answer: status === 200 ? null : body,
    drawn: status === 200 ? null : await drawnErrors(page, "LADR_Canvas") });
  await page.keyboard.press("Escape"); // the error dialog
  await page.waitForTimeout(500);
}

/** Set a widget as the user does (its callback runs), or `raw`: as a workflow file holds it. */
async function setWidget(page, type, name, value, raw = false) {
  await page.evaluate(([type, name, value, raw]) => {
    const app = window.comfyAPI.app.app;
    const node = app.graph._nodes.find((n) => n.type === type);
    const w = node.widgets.find((x) => x.name === name);
    w.value = value;
    if (!raw) w.callback?.call(w, value, app.canvas, node);
    app.canvas.setDirty(true, true);
  }, [type, name, value, raw]);
  await page.waitForTimeout(600);
}

/** The sampler's step map now: its bitmap and laid-out size, the words it draws. */
async function map(page, when) {
  await page.keyboard.press("Escape");
  await page.waitForTimeout(1500);
  const state = await page.evaluate(async () => {
    const app = window.comfyAPI.app.app;
    const node = app.graph._nodes.find((n) => n.type === "LADR_DiMOOSampler2");
    app.canvas.setDirty(true, true);
    await new Promise((r) => setTimeout(r, 800)); // frames: restore, redraw, observers
    const s = node.__ladrPreview;
    const draw = await import("/extensions/ComfyUI-LADR/ladr_preview_draw.js");
    const c = s.canvas;
    return { id: String(node.id), title: node.title, bitmap: [c.width, c.height],
             box: [c.clientWidth, c.clientHeight], dpr: window.devicePixelRatio || 1,
             cached: Boolean(s.payload?.cached), done: Boolean(s.payload?.done),
             texts: draw.planFrame(s.payload, c.width, c.height).filter((o) => o.op === "text")
               .map((o) => o.text) };
  });
  const box = await nodeBox(page, state.id);
  await page.screenshot({ path: join(outDir, `map_${when}.png`),
                          clip: { x: Math.max(0, box.x), y: Math.max(0, box.y),
                                  width: Math.min(box.width, WINDOW.width - Math.max(0, box.x)),
                                  height: Math.min(box.height, WINDOW.height - Math.max(0, box.y)) } });
  summary.maps[when] = state;
}

async function command(page, id) {
  await page.evaluate((id) => window.comfyAPI.app.app.extensionManager.command.execute(id), id);
  await page.waitForTimeout(2000);
}

/** What a typed width becomes: the frontend's own path (its prompt dialog calls setValue). */
async function typed(page, values) {
  return page.evaluate(async (values) => {
    const app = window.comfyAPI.app.app;
    app.canvas.setDirty(true, true);
    await new Promise((r) => setTimeout(r, 500)); // a frame: the extension follows the model
    const node = app.graph._nodes.find((n) => n.type === "LADR_Canvas");
    const w = node.widgets.find((x) => x.name === "width");
    const before = w.value;
    const got = {};
    for (const v of values) {
      w.setValue(v, { node, canvas: app.canvas });
      got[v] = w.value;
    }
    w.setValue(before, { node, canvas: app.canvas });
    return { step: w.options.step2, got, restored: w.value };
  }, values);
}

async function panelTexts(page) {
  await page.evaluate(() => {
    const app = window.comfyAPI.app.app;
    app.canvas.deselectAll?.();
    app.canvas.selectNode(app.graph._nodes.find((n) => n.type === "LADR_DiMOOSampler2"));
    app.canvas.setDirty(true, true);
  });
  const open = () => page.evaluate(() => Array.from(document.querySelectorAll("[role=tab]"))
    .some((t) => t.getBoundingClientRect().left > 900));
  if (!(await open())) await page.getByLabel("Toggle properties panel").click();
  await page.waitForTimeout(800);
  await page.getByRole("tab", { name: "Parameters", exact: true }).click();
  await page.waitForTimeout(1500);
  await page.screenshot({ path: join(outDir, "panel.png") });
  return page.evaluate(() => Array.from(document.querySelectorAll("body *"))
    .filter((e) => e.children.length === 0 && e.getBoundingClientRect().left > 900)
    .map((e) => e.textContent.trim()).filter(Boolean));
}

/** One part of the session; a part that fails is recorded (summary.failed) and the rest go on,
 * so each test reads what its own part saw. */
async function part(name, fn) {
  try {
    await fn();
  } catch (err) {
    summary.failed.push({ part: name, error: String(err).slice(0, 500) });
  }
}

try {
await withComfyPage(url, { name: "artist", viewport: WINDOW, settle: 6000 }, async (page) => {
  page.on("console", (m) => { if (m.type() === "warning") summary.warnings.push(m.text()); });
  await listen(page);
  const wf = JSON.parse(readFileSync(file, "utf8"));
  await page.evaluate(async (wf) => {
    const app = window.comfyAPI.app.app;
    await app.loadGraphData(wf);
    for (const n of app.graph._nodes) { // the same seed each time: a repeated run is cached
      const control = n.widgets?.find((w) => w.name === "control_after_generate");
      if (control) control.value = "fixed";
    }
  }, wf);
  await page.waitForTimeout(1500);
  summary.ids = await page.evaluate(() => Object.fromEntries(window.comfyAPI.app.app.graph._nodes
    .map((n) => [n.type, String(n.id)])));
  summary.title = await page.evaluate(() => window.comfyAPI.app.app.graph._nodes
    .find((n) => n.type === "LADR_DiMOOSampler2").title);
  await part("typed", async () => { summary.steps = await typed(page, [52, 50, 47]); });
  await part("first", async () => {
    await queue(page, "first");
    await map(page, "run");
  });
  await part("tab", async () => {
    await command(page, "Comfy.NewBlankWorkflow");
    await command(page, "Workspace.PreviousOpenedWorkflow");
    await map(page, "tab");
  });
  await part("reload", async () => {
    await page.reload({ waitUntil: "load" });
    await page.waitForFunction(() => window.comfyAPI?.app?.app?.graph?._nodes?.length, null,
                               { timeout: 120000 });
    await page.waitForTimeout(4000);
    await listen(page);
    await map(page, "reload");
  });
  await part("cached", async () => {
    await queue(page, "cached");
    await map(page, "cached");
  });
  await part("too_wide", async () => { // fails when the sampler runs, after a cached run
    await setWidget(page, "LADR_Canvas", "width", 2048);
    await queue(page, "too_wide");
    await map(page, "failed");
    const fit = /set width to at most (\d+) \(at height/.exec(
      summary.runs.too_wide.errors[0]?.message ?? "");
    if (fit) { // the width the message names: it runs
      await setWidget(page, "LADR_Canvas", "width", Number(fit[1]));
      await queue(page, "fits");
    }
  });
  await part("bad_width", async () => {
    await setWidget(page, "LADR_LoadDiMOOModel", "dtype", "fp32"); // the loader would run again
    await setWidget(page, "LADR_Canvas", "width", 50, true); // as a workflow file can hold
    await queue(page, "bad_width");
    await page.screenshot({ path: join(outDir, "bad_width.png") });
    const box = await nodeBox(page, summary.ids.LADR_Canvas); // the canvas node, close up
    await page.screenshot({ path: join(outDir, "bad_width_canvas.png"),
                            clip: { x: Math.max(0, box.x - 20), y: Math.max(0, box.y - 20),
                                    width: box.width + 40, height: box.height + 40 } });
    const details = page.getByRole("button", { name: "View details" }); // the Errors panel
    if (await details.count()) {
      await details.first().click();
      await page.waitForTimeout(1500);
      await page.screenshot({ path: join(outDir, "bad_width_details.png") });
    }
  });
  await part("next_good", async () => {
    await setWidget(page, "LADR_Canvas", "width", 52);
    await queue(page, "next_good");
  });
  await part("baseline", async () => {
    await setWidget(page, "LADR_Canvas", "width", 48);
    await setWidget(page, "LADR_DiMOOSampler2", "steps", 16); // a short official run
    await setWidget(page, "LADR_SamplingRule", "strategy", "baseline");
    await queue(page, "baseline");
    const mid = summary.runs.baseline.steps.find((s) => !s.done && s.step === 2);
    summary.baselineTexts = await page.evaluate(async (p) => {
      window.comfyAPI.api.api.dispatchCustomEvent("ladr.step", p); // shown as it was mid-run
      const draw = await import("/extensions/ComfyUI-LADR/ladr_preview_draw.js");
      return draw.planFrame(p, 320, 300).filter((o) => o.op === "text").map((o) => o.text);
    }, mid ?? null);
    await map(page, "baseline");
  });
  await part("panel", async () => { summary.panel = await panelTexts(page); });
});
} finally {
  writeFileSync(join(outDir, "summary.json"), JSON.stringify(summary, null, 1));
}
