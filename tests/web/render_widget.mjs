// Renders ladr.step payloads with web/ladr_preview_draw.js in headless Chromium (playwright-core)
// and writes, per payload: the draw ops, the centre pixel of every token cell, and a screenshot.
// usage: node render_widget.mjs <payloads.json> <out.json> [screenshot.png]
// The page is served from memory through request interception: no socket is opened.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const webDir = join(here, "..", "..", "web");
const [payloadFile, outFile, shotFile] = process.argv.slice(2);
const payloads = JSON.parse(readFileSync(payloadFile, "utf8"));
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

const profile = mkdtempSync(join(tmpdir(), "ladr-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 700, height: 340 },
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.route("http://ladr.test/**", (route) => {
    const name = new URL(route.request().url()).pathname.slice(1);
    if (name === "index.html") {
      return route.fulfill({ contentType: "text/html",
        body: "<!doctype html><body style='margin:0;background:#000'></body>" });
    }
    return route.fulfill({ contentType: "text/javascript",
                           body: readFileSync(join(webDir, name), "utf8") });
  });
  await page.goto("http://ladr.test/index.html");
  const results = await page.evaluate(async (items) => {
    const mod = await import("http://ladr.test/ladr_preview_draw.js");
    const out = [];
    let run = null; // payloads are one run's events in order, as the widget receives them
    for (const item of items) {
      // {restore: record, cached}: a finished run's record as a restored widget shows it
      if (!item?.restore) run = mod.trackRun(run, item);
      const p = item?.restore ? mod.restoredPayload(item.restore, item.cached)
        : mod.shownPayload(run, item);
      const canvas = document.createElement("canvas");
      canvas.width = 320; canvas.height = 300;
      canvas.style.marginRight = "8px";
      document.body.appendChild(canvas);
      const ctx = canvas.getContext("2d");
      const ops = mod.drawFrame(ctx, p);
      const cells = [];
      if (p && p.grid) {
        const r = mod.fitRect(p.grid, canvas.width, canvas.height, mod.headerHeight(p),
                               mod.footerHeight(p));
        for (let i = 0; i < p.grid[0]; i++) {
          for (let j = 0; j < p.grid[1]; j++) {
            const x = Math.floor(r.x + (j + 0.5) * r.cell);
            const y = Math.floor(r.y + (i + 0.5) * r.cell);
            cells.push(Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3)));
          }
        }
      }
      out.push({ ops, cells });
    }
    return out;
  }, payloads);
  if (shotFile) await page.screenshot({ path: shotFile });
  writeFileSync(outFile, JSON.stringify(results));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
