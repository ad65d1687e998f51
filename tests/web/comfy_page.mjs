// Shared by the local real-frontend checks (policy_screenshot, frontend_screenshot,
// template_layout): a throw-away headless Chromium profile, the ComfyUI app at `url` loaded
// and settled, the first-run template dialog dismissed; `fn(page)` runs, then the browser and
// its profile are removed, whatever happens.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export async function withComfyPage(url, { name, viewport, settle = 3000, afterEscape = 0 }, fn) {
  const profile = mkdtempSync(join(tmpdir(), `ladr-${name}-`));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport,
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.on("console", (m) => { if (m.type() === "error") console.error("page:", m.text()); });
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => window.comfyAPI?.app?.app?.graph, null, { timeout: 120000 });
    await page.waitForTimeout(settle);
    await page.keyboard.press("Escape"); // first-run template dialog
    if (afterEscape) await page.waitForTimeout(afterEscape);
    return await fn(page);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

// A node's box on the screen (its title bar included), in page pixels, and the canvas scale.
export async function nodeBox(page, id) {
  return page.evaluate((id) => {
    const app = window.comfyAPI.app.app;
    const n = app.graph.getNodeById(Number(id));
    const { scale, offset } = app.canvas.ds;
    const rect = app.canvas.canvas.getBoundingClientRect();
    const title = window.LiteGraph?.NODE_TITLE_HEIGHT ?? 30;
    return { x: rect.left + (n.pos[0] + offset[0]) * scale,
             y: rect.top + (n.pos[1] - title + offset[1]) * scale,
             width: n.size[0] * scale, height: (n.size[1] + title) * scale, scale };
  }, id);
}

// Run the workflow as shown (the frontend's own queue call) and return the server's answer to
// its POST /prompt: { status, body } (400 and node_errors: refused at validation, nothing ran).
export async function queueAnswer(page) {
  const posted = page.waitForResponse(
    (r) => r.url().endsWith("/prompt") && r.request().method() === "POST", { timeout: 120000 });
  await page.evaluate(() => window.comfyAPI.app.app.queuePrompt(0, 1).catch(() => null));
  const answer = await posted;
  return { status: answer.status(), body: await answer.json().catch(() => null) };
}

// What the frontend marks as wrong on the first node of `type` (after a refusal): the node
// (outlined) and the inputs it rings in red (their slot's hasErrors), once it has redrawn.
export async function drawnErrors(page, type) {
  await page.waitForTimeout(1000); // the frontend reconciles the error flags after a tick
  return page.evaluate((type) => {
    const node = window.comfyAPI.app.app.graph._nodes.find((n) => n.type === type);
    return { node: Boolean(node?.has_errors),
             inputs: (node?.inputs ?? []).filter((i) => i.hasErrors).map((i) => i.name) };
  }, type);
}
