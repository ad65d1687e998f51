// Loads web/ladr_preview.js (the ComfyUI extension) in headless Chromium against minimal
// stand-ins for the frontend's /scripts/app.js and /scripts/api.js (the real ones need the whole
// app; tests/web/frontend_screenshot.mjs covers the real frontend locally), then feeds it
// "ladr.step" events. usage: node extension_harness.mjs <payload.json> <out.json>
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const webDir = join(here, "..", "..", "web");
const [payloadFile, outFile] = process.argv.slice(2);
const payload = JSON.parse(readFileSync(payloadFile, "utf8"));

const STUBS = {
  "/scripts/app.js": `export const app = { extensions: [],
    graph: { nodes: {}, getNodeById(id) { return this.nodes[id] ?? null; } },
    registerExtension(e) { this.extensions.push(e); } };
    window.__app = app;`,
  "/scripts/api.js": `export const api = new EventTarget(); window.__api = api;`,
};

const profile = mkdtempSync(join(tmpdir(), "ladr-ext-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.route("http://ladr.test/**", (route) => {
    const path = new URL(route.request().url()).pathname;
    if (path === "/index.html") {
      return route.fulfill({ contentType: "text/html", body: "<!doctype html><body></body>" });
    }
    if (STUBS[path]) return route.fulfill({ contentType: "text/javascript", body: STUBS[path] });
    const name = path.replace("/extensions/ComfyUI-LADR/", "");
    return route.fulfill({ contentType: "text/javascript",
                           body: readFileSync(join(webDir, name), "utf8") });
  });
  await page.goto("http://ladr.test/index.html");
  const result = await page.evaluate(async (p) => {
    await import("http://ladr.test/extensions/ComfyUI-LADR/ladr_preview.js");
    const app = window.__app;
    const ext = app.extensions[0];
    ext.setup();
    const makeNode = (cls) => ({ constructor: { comfyClass: cls }, widgets: [],
      addDOMWidget(name, type, el, opts) {
        el.style.width = "320px"; el.style.height = "300px";
        document.body.appendChild(el); this.widgets.push({ name, opts }); return {}; } });
    const sampler = makeNode("LADR_DiMOOSampler2");
    const other = makeNode("KSampler");
    ext.nodeCreated(sampler);
    ext.nodeCreated(other);
    app.graph.nodes[7] = sampler;
    const canvas = document.querySelector("canvas[data-ladr-preview]");
    const ctx = canvas.getContext("2d");
    const centre = () => Array.from(ctx.getImageData(canvas.width / 2, canvas.height / 2, 1, 1).data.slice(0, 3));
    const before = centre();
    window.__api.dispatchEvent(new CustomEvent("ladr.step", { detail: { ...p, node: "99" } }));
    window.__api.dispatchEvent(new CustomEvent("ladr.step", { detail: p }));
    for (let i = 0; i < 50 && centre().join() === before.join(); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    return { name: ext.name, samplerWidgets: sampler.widgets.map((w) => [w.name, w.opts.serialize]),
             otherWidgets: other.widgets.length, canvases: document.querySelectorAll("canvas").length,
             before, after: centre(), size: [canvas.width, canvas.height] };
  }, payload);
  writeFileSync(outFile, JSON.stringify(result));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
