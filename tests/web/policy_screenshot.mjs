// Local check of the LADR Policy node in the REAL ComfyUI frontend (not run in CI):
//   node tests/web/policy_screenshot.mjs http://127.0.0.1:8188 out_prefix [preset ...]
// Adds one LADR Policy node, chooses each preset in turn through its widget (as a user would),
// prints which widgets show and what their labels say, and screenshots the node per preset
// (out_prefix_<preset>.png). Presets default to: paper adaptive off custom custom+adaptive
// ("+adaptive": the adaptive toggle switched on under custom).
import { withComfyPage } from "./comfy_page.mjs";

const [url, prefix, ...asked] = process.argv.slice(2);
const choices = asked.length ? asked : ["paper", "adaptive", "off", "custom", "custom+adaptive"];
await withComfyPage(url, { name: "policy", viewport: { width: 900, height: 900 } }, async (page) => {
  await page.evaluate(() => {
    const app = window.comfyAPI.app.app;
    app.graph.clear();
    const node = window.LiteGraph.createNode("LADR_Policy");
    node.pos = [60, 60];
    app.graph.add(node);
    window.__policy = node;
    const c = app.canvas;
    c.ds.scale = 1.2;
    c.ds.offset = [0, 0];
  });
  for (const choice of choices) {
    const [preset, toggle] = choice.split("+");
    const state = await page.evaluate(([preset, toggle]) => {
      const node = window.__policy;
      const set = (name, value) => {
        const w = node.widgets.find((x) => x.name === name);
        w.value = value;
        w.callback?.(value, window.comfyAPI.app.app.canvas, node);
      };
      set("preset", preset);
      if (preset === "custom") set("adaptive", Boolean(toggle));
      window.comfyAPI.app.app.canvas.setDirty(true, true);
      return { size: node.size, shown: node.widgets.filter((w) => !w.hidden)
        .map((w) => `${w.label ?? w.name}${w.disabled ? " (greyed)" : ""}: ${w.value}`) };
    }, [preset, toggle ?? ""]);
    console.log(JSON.stringify({ choice, ...state }));
    await page.waitForTimeout(800);
    await page.screenshot({ path: `${prefix}_${choice.replace("+", "_")}.png` });
  }
});
