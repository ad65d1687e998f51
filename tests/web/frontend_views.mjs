// What a user sees in the REAL ComfyUI frontend, for tests/web/test_web_frontend_views.py:
//   node tests/web/frontend_views.mjs <url> <out_dir> <plan.json>
// plan.json: { runs: [{ name, file, seed }], help: [node types], notice: file, templates: pack,
//              names: [the pack's template titles] }
// For each run: the UI workflow is loaded at its own view (extra.ds) and queued; every
// progress-bar preview the frontend receives for each node is kept (<name>_preview_<node>_<i>.jpg)
// with the "ladr.step" events; the window after the run (<name>_view.png); the first step's
// preview replayed on the sampler (<name>_step1.png). Then each help page in the right panel's
// Info tab (widths measured, help_<type>.png), the LADR Policy node's Parameters panel under a
// preset (policy_panel.png), the notice for a missing checkpoint (notice.png) and the template
// browser (templates.png). Everything measured goes to <out_dir>/summary.json.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { nodeBox, withComfyPage } from "./comfy_page.mjs";

const [url, outDir, planFile] = process.argv.slice(2);
const plan = JSON.parse(readFileSync(planFile, "utf8"));
const summary = { runs: {}, help: {}, policy: null, notice: null, templates: null };
const WINDOW = { width: 1600, height: 900 };
// the seed's widget index on DiMOO Sampler and on its legacy twin (saved workflows)
const SEED = { LADR_DiMOOSampler2: 5, LADR_DiMOOSampler: 7 };

function save(name, b64) {
  writeFileSync(join(outDir, name), Buffer.from(b64, "base64"));
}

async function listen(page) {
  await page.evaluate(() => {
    const api = window.comfyAPI.api.api;
    window.__ladr = { events: [], previews: [], done: [], errors: [] };
    api.addEventListener("ladr.step", (e) => window.__ladr.events.push(e.detail));
    api.addEventListener("b_preview_with_metadata", (e) => window.__ladr.previews.push(
      { node: String(e.detail.displayNodeId ?? e.detail.nodeId), blob: e.detail.blob }));
    api.addEventListener("execution_success", (e) => window.__ladr.done.push(e.detail));
    api.addEventListener("execution_error", (e) => window.__ladr.errors.push(e.detail));
  });
}

/** A node's box on the screen (title bar included), from the canvas transform. */
async function run(page, { name, file, seed }) {
  // the panel opens by itself on the default workflow's missing models: the canvas as a
  // template opens it, without the panel over its right-hand column
  if (await panelOpen(page)) await page.getByLabel("Toggle properties panel").click();
  await page.mouse.move(700, 880); // no tooltip left over the canvas
  const wf = JSON.parse(readFileSync(file, "utf8"));
  for (const n of wf.nodes) if (n.type in SEED) n.widgets_values[SEED[n.type]] = seed;
  await page.evaluate(async (wf) => {
    Object.assign(window.__ladr, { events: [], previews: [], done: [], errors: [] });
    await window.comfyAPI.app.app.loadGraphData(wf);
  }, wf);
  await page.waitForTimeout(1500);
  const unknown = await page.evaluate(() => window.comfyAPI.app.app.graph._nodes
    .filter((n) => !window.LiteGraph.registered_node_types[n.type]).map((n) => n.type));
  const queued = await page.evaluate(async () => {
    const res = await window.comfyAPI.app.app.queuePrompt(0, 1);
    return res ?? null;
  });
  await page.waitForFunction(() => window.__ladr.done.length + window.__ladr.errors.length > 0,
                             null, { timeout: 300000 });
  await page.keyboard.press("Escape"); // a dialog that opened late on a slow machine
  await page.waitForTimeout(2500);
  await page.screenshot({ path: join(outDir, `${name}_view.png`) });
  const got = await page.evaluate(async () => {
    const read = (blob) => new Promise((resolve) => {
      const r = new FileReader();
      r.onload = () => resolve(String(r.result).split(",")[1]);
      r.readAsDataURL(blob);
    });
    const { events, previews, done, errors } = window.__ladr;
    const out = [];
    for (const p of previews) out.push({ node: p.node, type: p.blob.type, b64: await read(p.blob) });
    const app = window.comfyAPI.app.app;
    return { events, previews: out, done, errors, scale: app.canvas.ds.scale,
             nodes: app.graph._nodes.map((n) => ({ id: String(n.id), type: n.type })) };
  });
  const counts = {};
  const previews = [];
  for (const p of got.previews) {
    const i = counts[p.node] = (counts[p.node] ?? -1) + 1;
    const fileName = `${name}_preview_${p.node}_${i}.jpg`;
    save(fileName, p.b64);
    previews.push({ node: p.node, index: i, file: fileName, type: p.type });
  }
  const boxes = {};
  for (const n of got.nodes) boxes[n.id] = { type: n.type, ...(await nodeBox(page, n.id)) };
  // The first step's preview and step map, replayed on the sampler as they were shown mid-run.
  const sampler = got.nodes.find((n) => n.type in SEED);
  if (sampler && got.events.length > 1) {
    await page.evaluate((id) => {
      const api = window.comfyAPI.api.api;
      const first = window.__ladr.previews.find((p) => p.node === id);
      const step = window.__ladr.events.find((e) => e.node === id && e.step === 1);
      api.dispatchCustomEvent("ladr.step", step);
      api.dispatchCustomEvent("b_preview_with_metadata", { blob: first.blob, nodeId: id,
                                                           displayNodeId: id });
      window.comfyAPI.app.app.canvas.setDirty(true, true);
    }, sampler.id);
    await page.waitForTimeout(1500);
    const box = boxes[sampler.id];
    const clip = { x: Math.max(0, box.x - 4), y: Math.max(0, box.y - 4),
                   width: Math.min(box.width + 8, WINDOW.width - box.x),
                   height: Math.min(box.height + 8, WINDOW.height - box.y) };
    await page.screenshot({ path: join(outDir, `${name}_step1.png`), clip });
  }
  summary.runs[name] = { queued, unknown, events: got.events, previews, done: got.done,
                         errors: got.errors, scale: got.scale, boxes };
}

/** Whether the right-hand panel is open (its tabs on the right of the window). */
async function panelOpen(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll("[role=tab]"))
    .some((t) => t.getBoundingClientRect().left > 900));
}

async function openPanel(page, tab) {
  if (!(await panelOpen(page))) await page.getByLabel("Toggle properties panel").click();
  await page.waitForTimeout(800);
  await page.getByRole("tab", { name: tab, exact: true }).click();
  await page.waitForTimeout(1200);
}

async function addSelected(page, type, preset) {
  await page.evaluate(([type, preset]) => {
    const app = window.comfyAPI.app.app;
    app.graph.clear();
    app.canvas.ds.offset = [0, 0];
    app.canvas.ds.scale = 1;
    const node = window.LiteGraph.createNode(type);
    node.pos = [300, 260];
    app.graph.add(node);
    const w = node.widgets?.find((x) => x.name === "preset");
    if (w && preset) { w.value = preset; w.callback?.(preset); }
    app.canvas.selectNode(node);
    app.canvas.setDirty(true, true);
  }, [type, preset ?? ""]);
  await page.waitForTimeout(600);
}

/** The help page in the Info tab: the panel's width, how far anything sticks out of it (px),
 * each table's width. */
async function measureHelp(page) {
  return page.evaluate(() => {
    const content = Array.from(document.querySelectorAll(".markdown-content"))
      .find((e) => e.getBoundingClientRect().left > 900 && e.querySelector("h1"));
    if (!content) return null;
    const box = content.getBoundingClientRect();
    let overflow = 0;
    for (const e of content.querySelectorAll("*")) {
      const r = e.getBoundingClientRect();
      if (r.width > 0) overflow = Math.max(overflow, r.right - box.right);
    }
    return { title: content.querySelector("h1").innerText, width: content.clientWidth,
             scrollWidth: content.scrollWidth, overflow,
             tables: Array.from(content.querySelectorAll("table")).map((t) => t.scrollWidth) };
  });
}

async function panelClip(page, name) {
  const clip = await page.evaluate(() => {
    const tab = Array.from(document.querySelectorAll("[role=tab]"))
      .find((t) => t.getBoundingClientRect().left > 900);
    let e = tab;
    while (e && e.getBoundingClientRect().height < 600) e = e.parentElement;
    const r = (e ?? tab).getBoundingClientRect();
    return { x: r.left, y: r.top, width: r.width, height: r.height };
  });
  await page.screenshot({ path: join(outDir, name), clip });
}

async function help(page) {
  for (const type of plan.help) {
    await addSelected(page, type);
    await openPanel(page, "Info");
    summary.help[type] = await measureHelp(page);
    if (type === plan.help[0]) await panelClip(page, `help_${type}.png`);
  }
}

async function policy(page) {
  await addSelected(page, "LADR_Policy", "paper");
  await openPanel(page, "Parameters");
  summary.policy = await page.evaluate(() => {
    const inPanel = (e) => e.getBoundingClientRect().left > 900;
    const node = window.comfyAPI.app.app.graph._nodes[0];
    const texts = Array.from(document.querySelectorAll("body *"))
      .filter((e) => e.children.length === 0 && inPanel(e)).map((e) => e.textContent.trim());
    return { labels: node.widgets.filter((w) => !w.hidden).map((w) => w.label ?? w.name),
             panelTexts: texts.filter(Boolean),
             inputs: Array.from(document.querySelectorAll("input")).filter(inPanel)
               .map((i) => ({ value: i.value, disabled: i.disabled })) };
  });
  await page.screenshot({ path: join(outDir, "policy_panel.png") });
}

async function notice(page) {
  if (await panelOpen(page)) await page.getByLabel("Toggle properties panel").click();
  await page.mouse.move(700, 880);
  const wf = JSON.parse(readFileSync(plan.notice, "utf8"));
  await page.evaluate(async (wf) => {
    window.comfyAPI.app.app.graph.clear();
    await window.comfyAPI.app.app.loadGraphData(wf);
  }, wf);
  await page.waitForTimeout(2500);
  summary.notice = await page.evaluate(() => Array.from(document.querySelectorAll(
    ".p-toast-message")).map((e) => e.innerText));
  await page.screenshot({ path: join(outDir, "notice.png") });
  await page.evaluate(() => window.comfyAPI.app.app.extensionManager?.toast?.removeAll?.());
}

async function templates(page) {
  await page.getByText("Templates", { exact: true }).first().click();
  await page.waitForTimeout(2500);
  await page.getByText(plan.templates, { exact: true }).first().click();
  await page.waitForTimeout(3000);
  // each of the pack's card titles: the card clamps a title to one line (a longer one is cut
  // with an ellipsis: its text then runs over two lines and its scrollHeight exceeds its box)
  summary.templates = await page.evaluate((names) => Array.from(document.querySelectorAll("*"))
    .filter((e) => e.children.length === 0 && names.includes(e.textContent.trim()))
    .map((e) => {
      const range = document.createRange();
      range.selectNodeContents(e);
      return { title: e.textContent.trim(), lines: range.getClientRects().length,
               scrollHeight: e.scrollHeight, clientHeight: e.clientHeight };
    }), plan.names);
  await page.screenshot({ path: join(outDir, "templates.png") });
  await page.keyboard.press("Escape");
}

await withComfyPage(url, { name: "views", viewport: WINDOW, settle: 4000, afterEscape: 800 },
  async (page) => {
    await listen(page);
    for (const r of plan.runs) await run(page, r);
    await help(page);
    await policy(page);
    await notice(page);
    await templates(page);
  });
writeFileSync(join(outDir, "summary.json"), JSON.stringify(summary, null, 1));
console.log(JSON.stringify({ runs: Object.keys(summary.runs), help: Object.keys(summary.help) }));
