// Every template at the zoom it opens with in the REAL ComfyUI frontend, for
// tests/web/test_web_template_zoom.py:
//   node tests/web/template_zoom.mjs <url> <out_dir> <ui workflow files...>
// In a 1600 x 1000 and a 1280 x 800 window, each workflow is opened twice: as the template
// browser opens it (app.loadGraphData(..., { openSource: "template" }): frontend 1.49.6 then
// ignores the saved view and fits the graph to the window, fitView) and as a file (its saved
// view, extra.ds). Recorded per opening: the canvas scale, the frontend's low-quality zoom
// threshold (below it no node title or widget text is drawn), whether the canvas is in low
// quality after drawing, the screen box of every node (as the frontend bounds it); a screenshot <w>x<h>_<i>_<how>.png.
// Everything goes to <out_dir>/zoom.json.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { withComfyPage } from "./comfy_page.mjs";

const [url, outDir, ...files] = process.argv.slice(2);
const WINDOWS = [{ width: 1600, height: 1000 }, { width: 1280, height: 800 }];
const opened = [];

// The canvas as a user who opens a template sees it: no right-hand panel (the default
// workflow's missing models open it) and no notice left from the workflow before.
async function clear(page) {
  const panel = await page.evaluate(() => Array.from(document.querySelectorAll("[role=tab]"))
    .some((t) => t.getBoundingClientRect().left > window.innerWidth * 0.6));
  if (panel) await page.getByLabel("Toggle properties panel").click();
  await page.evaluate(() => window.comfyAPI.app.app.extensionManager?.toast?.removeAll?.());
}

async function open(page, wf, name, how) {
  await clear(page);
  await page.evaluate(async ([wf, name, how]) => {
    const app = window.comfyAPI.app.app;
    const options = how === "template" ? { openSource: "template" } : {};
    await app.loadGraphData(wf, true, true, name, options);
  }, [wf, name, how]);
  await page.waitForTimeout(1500);
  await page.keyboard.press("Escape"); // a dialog (missing models) over the canvas
  await page.mouse.move(5, 500);
  await page.waitForTimeout(800);
  await clear(page);
  await page.waitForTimeout(500);
  return page.evaluate(() => {
    const app = window.comfyAPI.app.app;
    const c = app.canvas;
    c.draw(true, true);
    const { scale, offset } = c.ds;
    const rect = c.canvas.getBoundingClientRect();
    const at = (x, y) => [rect.left + (x + offset[0]) * scale, rect.top + (y + offset[1]) * scale];
    return {
      scale, threshold: c._lowQualityZoomThreshold, lowQuality: c.low_quality,
      titleFontPx: window.LiteGraph.NODE_TEXT_SIZE * scale,
      widgetFontPx: window.LiteGraph.NODE_SUBTEXT_SIZE * scale,
      canvas: [rect.width, rect.height],
      nodes: app.graph._nodes.map((n) => { // its box as drawn: title bar, collapsed or not
        n.updateArea?.();
        const [x, y, w, h] = n.boundingRect;
        const [left, top] = at(x, y), [right, bottom] = at(x + w, y + h);
        return { title: n.title, collapsed: !!n.flags?.collapsed, left, top, right, bottom };
      }),
    };
  });
}

for (const viewport of WINDOWS) {
  await withComfyPage(url, { name: "zoom", viewport, settle: 4000, afterEscape: 800 },
    async (page) => {
      for (const [i, file] of files.entries()) {
        const wf = JSON.parse(readFileSync(file, "utf8"));
        const name = basename(file).replace(/\.json$/, "");
        for (const how of ["template", "file"]) {
          const m = await open(page, structuredClone(wf), name, how);
          const shot = `${viewport.width}x${viewport.height}_${i}_${how}.png`;
          await page.screenshot({ path: join(outDir, shot) });
          opened.push({ file: basename(file), how, window: [viewport.width, viewport.height],
                        shot, ...m });
        }
      }
    });
}
writeFileSync(join(outDir, "zoom.json"), JSON.stringify(opened, null, 1));
console.log(JSON.stringify(opened.map((o) => [o.file, o.how, o.window, +o.scale.toFixed(3)])));
