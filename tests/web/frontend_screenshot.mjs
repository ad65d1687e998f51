// Local check of the widget in the REAL ComfyUI frontend (not run in CI):
//   node tests/web/frontend_screenshot.mjs http://127.0.0.1:8188 example_workflows/x.json out.png [model_name] [size]
// Loads the UI workflow into the app, queues it, waits for every sampler's final "ladr.step"
// event and screenshots the canvas with the live preview widget.
import { readFileSync } from "node:fs";
import { withComfyPage } from "./comfy_page.mjs";

const [url, workflowFile, shot, modelName, size] = process.argv.slice(2);
const workflow = JSON.parse(readFileSync(workflowFile, "utf8"));
// the seed's widget index on DiMOO Sampler and on its legacy twin; where width, height are
const SEED = { LADR_DiMOOSampler2: 5, LADR_DiMOOSampler: 7 };
const SIZE = { LADR_Canvas: 0, LADR_DiMOOSampler: 2 };
for (const n of workflow.nodes) {
  if (modelName && n.type === "LADR_LoadDiMOOModel") n.widgets_values[0] = modelName;
  if (n.type in SEED) n.widgets_values[SEED[n.type]] = Math.floor(Math.random() * 1e9);
  if (size && n.type in SIZE) {
    n.widgets_values[SIZE[n.type]] = Number(size);
    n.widgets_values[SIZE[n.type] + 1] = Number(size);
  }
}
await withComfyPage(url, { name: "frontend", viewport: { width: 1600, height: 900 },
                         afterEscape: 500 }, async (page) => {
  await page.evaluate(async (wf) => {
    const app = window.comfyAPI.app.app;
    window.__ladrEvents = [];
    window.comfyAPI.api.api.addEventListener("ladr.step", (e) => window.__ladrEvents.push(e.detail));
    await app.loadGraphData(wf);
  }, workflow);
  await page.waitForTimeout(1500);
  await page.evaluate(async () => { await window.comfyAPI.app.app.queuePrompt(0, 1); });
  // Every sampler's final event (a side-by-side workflow has two; the first done is not enough).
  const samplers = workflow.nodes.filter((n) => n.type in SEED).map((n) => String(n.id));
  await page.waitForFunction((ids) => ids.every((id) => window.__ladrEvents.some(
    (e) => e.done && e.node === id)), samplers, { timeout: 600000 });
  // The workflow's own view (its extra.ds), as a user opening it sees it, unless asked for a
  // scale.
  await page.evaluate((scale) => {
    const c = window.comfyAPI.app.app.canvas;
    if (scale) c.ds.scale = Number(scale);
    c.setDirty(true, true);
  }, process.env.LADR_SHOT_SCALE || "");
  await page.keyboard.press("Escape"); // a template dialog that opened late on a slow machine
  await page.waitForTimeout(2500);
  const events = await page.evaluate(() => window.__ladrEvents.map((e) => ({ node: e.node, step: e.step, done: e.done, phase: e.phase, masked_pct: e.masked_pct })));
  console.log(JSON.stringify({ events: events.length, last: events[events.length - 1] }));
  await page.screenshot({ path: shot });
  // Replay the mid-run frame (closest to 50% masked, with rescues) to show what a run looks like.
  const mid = await page.evaluate(() => {
    const ev = window.__ladrEvents.filter((e) => !e.done);
    const pick = ev.reduce((a, e) => (Math.abs(e.masked_pct - 50) - (e.rescued > 0 ? 100 : 0) <
      Math.abs(a.masked_pct - 50) - (a.rescued > 0 ? 100 : 0) ? e : a), ev[0]);
    window.comfyAPI.api.api.dispatchCustomEvent("ladr.step", pick);
    return { step: pick.step, masked_pct: pick.masked_pct, rescued: pick.rescued };
  });
  await page.waitForTimeout(1500);
  console.log(JSON.stringify({ mid }));
  await page.screenshot({ path: shot.replace(/\.png$/, "_mid.png") });
});
