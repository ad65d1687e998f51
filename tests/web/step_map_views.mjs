// The step map's life in the REAL ComfyUI frontend, for tests/web/test_web_step_map.py:
//   node tests/web/step_map_views.mjs <url> <out_dir> <workflow.json> [template.json ...]
// Loads the UI workflow, queues it (seed fixed), and records the sampler's step map after the
// run, after switching to a new workflow tab and back, after a page reload, and after the
// same prompt queued again (ComfyUI serves it from its cache); then sets the canvas's height
// to 50 px (as a hand-edited file can) and queues, recording the server's answer and what
// the frontend draws on DiMOO Canvas. Each state: the
// widget's payload flags, its drawn texts (planFrame of the extension's own module) and a
// screenshot of the sampler (<out_dir>/map_<when>.png). Then each template opened as saved
// (its own view, extra.ds): the zoom, whether the frontend draws it in its low-quality mode
// (no text), its widget and title font sizes, every node's box in the window and a
// screenshot (<out_dir>/open_<i>.png). Writes <out_dir>/summary.json.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { drawnErrors, nodeBox, queueAnswer, withComfyPage } from "./comfy_page.mjs";

const [url, outDir, file, ...templates] = process.argv.slice(2);
const SAMPLER = "LADR_DiMOOSampler2";
const summary = { states: {}, badSize: null, opened: [] };

async function listen(page) {
  await page.evaluate(() => {
    const api = window.comfyAPI.api.api;
    window.__ladr = { done: [], errors: [], cached: [] };
    api.addEventListener("execution_success", (e) => window.__ladr.done.push(e.detail));
    api.addEventListener("execution_error", (e) => window.__ladr.errors.push(e.detail));
    api.addEventListener("execution_cached", (e) => window.__ladr.cached.push(e.detail));
  });
}

async function queueAndWait(page) {
  await page.evaluate(async () => {
    Object.assign(window.__ladr, { done: [], errors: [], cached: [] });
    try {
      await window.comfyAPI.app.app.queuePrompt(0, 1);
    } catch (err) { // refused at validation: what the server said
      window.__ladr.errors.push({ refused: String(err), body: JSON.stringify(err.response ?? null) });
    }
  });
  await page.waitForFunction(() => window.__ladr.done.length + window.__ladr.errors.length > 0,
                             null, { timeout: 300000 });
  await page.waitForTimeout(1500);
}

/** The sampler's step map now: its payload's flags, the texts it draws, a screenshot. */
async function record(page, when) {
  await page.keyboard.press("Escape"); // a dialog that opened late (templates) over the canvas
  await page.waitForTimeout(1500);
  const state = await page.evaluate(async (type) => {
    const app = window.comfyAPI.app.app;
    const node = app.graph._nodes.find((n) => n.type === type);
    app.canvas.setDirty(true, true);
    await new Promise((r) => setTimeout(r, 500)); // a frame: onDrawForeground restores
    const p = node?.__ladrPreview?.payload ?? null;
    const draw = await import("/extensions/ComfyUI-LADR/ladr_preview_draw.js");
    const texts = draw.planFrame(p, 320, 300).filter((o) => o.op === "text").map((o) => o.text);
    const images = app.nodeOutputs?.[String(node?.id)]?.images ?? [];
    return { id: node ? String(node.id) : null, done: Boolean(p?.done), restored: Boolean(p?.restored),
             preview: images.map((i) => i.filename), imgs: node?.imgs?.length ?? 0,
             cached: Boolean(p?.cached), texts, hasProperty: Boolean(node?.properties?.ladr_last_run) };
  }, SAMPLER);
  const box = await nodeBox(page, state.id); // the sampler's box on the screen
  const clip = { x: Math.max(0, box.x), y: Math.max(0, box.y),
                 width: Math.min(box.width, 1600 - Math.max(0, box.x)),
                 height: Math.min(box.height, 1000 - Math.max(0, box.y)) };
  await page.screenshot({ path: join(outDir, `map_${when}.png`), clip });
  summary.states[when] = { ...state, box };
}

async function command(page, id) {
  await page.evaluate((id) => window.comfyAPI.app.app.extensionManager.command.execute(id), id);
  await page.waitForTimeout(2000);
}

try {
await withComfyPage(url, { name: "stepmap", viewport: { width: 1600, height: 1000 }, settle: 6000 },
  async (page) => {
    await listen(page);
    const wf = JSON.parse(readFileSync(file, "utf8"));
    await page.evaluate(async (wf) => {
      const app = window.comfyAPI.app.app;
      await app.loadGraphData(wf);
      for (const n of app.graph._nodes) { // the same seed twice: the second run is cached
        const control = n.widgets?.find((w) => w.name === "control_after_generate");
        if (control) control.value = "fixed";
      }
    }, wf);
    await page.waitForTimeout(1500);
    await queueAndWait(page);
    summary.firstErrors = await page.evaluate(() => window.__ladr.errors);
    await record(page, "run");
    await command(page, "Comfy.NewBlankWorkflow");
    await command(page, "Workspace.PreviousOpenedWorkflow");
    await record(page, "tab");
    await page.reload({ waitUntil: "load" });
    await page.waitForFunction(() => window.comfyAPI?.app?.app?.graph?._nodes?.length, null,
                               { timeout: 120000 });
    await page.waitForTimeout(4000);
    await page.keyboard.press("Escape");
    await listen(page);
    await record(page, "reload");
    await queueAndWait(page);
    summary.cachedNodes = await page.evaluate(() => window.__ladr.cached.map((c) => c.nodes));
    await record(page, "cached");
    await page.evaluate(() => {
      const app = window.comfyAPI.app.app;
      const canvas = app.graph._nodes.find((n) => n.type === "LADR_Canvas");
      canvas.widgets.find((w) => w.name === "height").value = 50; // as a hand-edited file
    });
    const { status, body } = await queueAnswer(page); // refused at /prompt: nothing runs
    summary.badSize = { status, answer: body, drawn: await drawnErrors(page, "LADR_Canvas"),
      canvas: await page.evaluate(() => String(window.comfyAPI.app.app.graph._nodes
        .find((n) => n.type === "LADR_Canvas").id)) };
    await page.screenshot({ path: join(outDir, "bad_size.png") }); // the error as shown
    await page.keyboard.press("Escape");
    for (const [i, template] of templates.entries()) {
      const wf = JSON.parse(readFileSync(template, "utf8"));
      await page.evaluate(() => { // an earlier template's notices (8B checkpoint) closed
        for (const b of document.querySelectorAll(".p-toast-close-button")) b.click();
      });
      await page.waitForTimeout(500);
      await page.evaluate(async (wf) => window.comfyAPI.app.app.loadGraphData(wf), wf);
      await page.waitForTimeout(1500);
      await page.keyboard.press("Escape");
      await page.waitForTimeout(500);
      summary.opened.push({ file: template, ...(await page.evaluate(() => {
        const app = window.comfyAPI.app.app;
        const c = app.canvas;
        c.setDirty(true, true);
        c.draw(true, true); // the frontend settles its quality mode when it draws
        const { scale, offset } = c.ds;
        const rect = c.canvas.getBoundingClientRect();
        const title = window.LiteGraph?.NODE_TITLE_HEIGHT ?? 30;
        const nodes = app.graph._nodes.map((n) => ({ // each node's box in the window, px
          title: n.title, left: rect.left + (n.pos[0] + offset[0]) * scale,
          top: rect.top + (n.pos[1] - title + offset[1]) * scale,
          right: rect.left + (n.pos[0] + n.size[0] + offset[0]) * scale,
          bottom: rect.top + (n.pos[1] + (n.flags?.collapsed ? 0 : n.size[1]) + offset[1]) * scale }));
        const px = (font) => Number(/(\d+(?:\.\d+)?)px/.exec(font)?.[1] ?? NaN);
        return { scale, lowQuality: Boolean(c.low_quality), nodes,
                 window: [window.innerWidth, window.innerHeight],
                 widgetFontPx: px(c.inner_text_font), titleFontPx: px(c.title_text_font) };
      })) });
      await page.screenshot({ path: join(outDir, `open_${i}.png`) });
    }
  });
} finally { // what was recorded, also when a step failed
  writeFileSync(join(outDir, "summary.json"), JSON.stringify(summary, null, 1));
}
