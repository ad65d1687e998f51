// Local check of the example workflows' layout in the REAL ComfyUI frontend (not run in CI):
//   node tests/web/template_layout.mjs http://127.0.0.1:8188 out_dir example_workflows/*.json
// Loads each UI workflow (nothing is queued), then prints, per workflow, every node's frontend
// size next to the size the file declares, and every pair of node boxes (title bar included)
// that overlap; writes out_dir/<name>.png of the whole graph. Exit code 1 if any overlap or
// any node the frontend had to grow beyond its declared size.
import { readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { withComfyPage } from "./comfy_page.mjs";

const [url, outDir, ...files] = process.argv.slice(2);
let bad = 0;
await withComfyPage(url, { name: "layout", viewport: { width: 1900, height: 1000 },
                         settle: 5000, afterEscape: 1000 }, async (page) => {
  for (const file of files) {
    const wf = JSON.parse(readFileSync(file, "utf8"));
    const report = await page.evaluate(async (wf) => {
      const app = window.comfyAPI.app.app;
      await app.loadGraphData(wf);
      await new Promise((r) => setTimeout(r, 1500));
      const title = window.LiteGraph?.NODE_TITLE_HEIGHT ?? 30;
      const declared = Object.fromEntries(wf.nodes.map((n) => [n.id, n.size]));
      const nodes = app.graph._nodes.map((n) => ({
        id: n.id, title: n.title, pos: [...n.pos], size: [...n.size], flags: { ...n.flags },
        min: [...n.computeSize()], declared: declared[n.id],
      }));
      const box = (n) => [n.pos[0], n.pos[1] - title, n.pos[0] + n.size[0],  // collapsed: its title bar
                          n.flags?.collapsed ? n.pos[1] : n.pos[1] + n.size[1]];
      const overlaps = [];
      for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
        const a = box(nodes[i]), b = box(nodes[j]);
        if (a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]) overlaps.push([nodes[i].title, nodes[j].title]);
      }
      const grown = nodes.filter((n) => n.min[0] > n.declared[0] + 1 || n.min[1] > n.declared[1] + 1)
        .map((n) => ({ title: n.title, min: n.min.map(Math.ceil), declared: n.declared }));
      const xs = nodes.map((n) => n.pos[0] + n.size[0]), ys = nodes.map((n) => n.pos[1] + n.size[1]);
      const c = app.canvas;
      const scale = Math.min(1780 / (Math.max(...xs) + 40), 900 / (Math.max(...ys) + 60), 1.0);
      c.ds.scale = scale; c.ds.offset = [70, 70]; c.setDirty(true, true);
      return { nodes, overlaps, grown };
    }, wf);
    await page.keyboard.press("Escape"); // a dialog (templates, errors) over the canvas
    await page.waitForTimeout(1200);
    await page.screenshot({ path: join(outDir, basename(file).replace(/\.json$/, ".png")) });
    console.log(JSON.stringify({ file: basename(file), overlaps: report.overlaps, grown: report.grown,
      sizes: report.nodes.map((n) => [n.title, n.size.map(Math.round), n.min.map(Math.ceil)]) }));
    if (report.overlaps.length || report.grown.length) bad = 1;
  }
});
process.exit(bad);
