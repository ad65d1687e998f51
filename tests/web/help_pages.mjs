// Each node's help as the REAL ComfyUI frontend opens it, for tests/web/test_web_help_pages.py:
//   node tests/web/help_pages.mjs <url> <out_dir> <node types, comma-separated>
// For each type: a fresh node on an empty canvas, selected, its help in the right panel's Info
// tab. Recorded: every request the page made under /docs/ with its status (the frontend tries
// <node>/<locale>.md, then <node>.md), the help text shown, and the node as the frontend built
// it (input slots, widgets with their V3 `advanced` flag and whether the canvas draws them,
// outputs). Then LADR Policy's Parameters panel: the section titles and the widget labels
// under each (parameters_LADR_Policy.png). Everything goes to <out_dir>/help.json.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { withComfyPage } from "./comfy_page.mjs";

const [url, outDir, types] = process.argv.slice(2);
const out = { nodes: {}, docs: [], parameters: null };

async function addSelected(page, type) {
  return page.evaluate((type) => {
    const app = window.comfyAPI.app.app;
    app.graph.clear();
    app.canvas.ds.offset = [0, 0];
    app.canvas.ds.scale = 1;
    const node = window.LiteGraph.createNode(type);
    node.pos = [300, 260];
    app.graph.add(node);
    app.canvas.selectNode(node);
    app.canvas.setDirty(true, true);
    return { title: node.title,
             inputs: (node.inputs ?? []).map((i) => ({ name: i.name, widget: !!i.widget })),
             widgets: (node.widgets ?? []).map((w) => ({
               name: w.name, type: w.type, advanced: !!w.options?.advanced, hidden: !!w.hidden,
               drawn: node.isWidgetVisible(w) })),
             outputs: (node.outputs ?? []).map((o) => o.name) };
  }, type);
}

async function openTab(page, tab) {
  const open = await page.evaluate(() => Array.from(document.querySelectorAll("[role=tab]"))
    .some((t) => t.getBoundingClientRect().left > 900));
  if (!open) await page.getByLabel("Toggle properties panel").click();
  await page.waitForTimeout(800);
  await page.getByRole("tab", { name: tab, exact: true }).click();
}

// The help page in the Info tab, once its title is not `before` (the previous node's).
async function helpText(page, before) {
  const shown = () => Array.from(document.querySelectorAll(".markdown-content"))
    .find((e) => e.getBoundingClientRect().left > 900 && e.querySelector("h1"));
  await page.waitForFunction(([shown, before]) => {
    const h1 = eval(shown)()?.querySelector("h1")?.innerText;
    return h1 && h1 !== before;
  }, [`(${shown})`, before], { timeout: 15000 }).catch(() => null);
  return page.evaluate((shown) => eval(shown)()?.innerText ?? null, `(${shown})`);
}

await withComfyPage(url, { name: "help", viewport: { width: 1600, height: 1000 }, settle: 4000,
                           afterEscape: 800 }, async (page) => {
  let current = null;
  let before = null;
  page.on("response", (r) => {
    if (r.url().includes("/docs/")) out.docs.push({ node: current, url: r.url(), status: r.status() });
  });
  for (const type of types.split(",")) {
    current = type;
    const node = await addSelected(page, type);
    await openTab(page, "Info");
    const help = await helpText(page, before);
    before = help?.split("\n")[0] ?? before;
    out.nodes[type] = { ...node, help };
  }
  current = null;
  await addSelected(page, "LADR_Policy");
  await openTab(page, "Parameters");
  await page.waitForTimeout(1500);
  // the panel's sections: each title (a button row) and the widget labels below it
  out.parameters = await page.evaluate(() => {
    const inPanel = (e) => e.getBoundingClientRect().left > 900;
    return Array.from(document.querySelectorAll("body *"))
      .filter((e) => e.children.length === 0 && inPanel(e) && e.textContent.trim())
      .map((e) => ({ text: e.textContent.trim(), top: Math.round(e.getBoundingClientRect().top),
                     height: Math.round(e.getBoundingClientRect().height) }));
  });
  await page.screenshot({ path: join(outDir, "parameters_LADR_Policy.png") });
});
writeFileSync(join(outDir, "help.json"), JSON.stringify(out, null, 1));
console.log(JSON.stringify({ nodes: Object.keys(out.nodes).length, docs: out.docs.length }));
