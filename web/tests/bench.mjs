// The browser player's timings in headless Chromium (SwiftShader):
//   node web/tests/bench.mjs SITE RUNS STEPS
// Each run starts a fresh browser (a cold load: no cache), opens the site
// with 10 steps per frame, and records the seconds from navigation to the
// first finished step, then the milliseconds per step over STEPS steps
// (wall time between two status readings). Prints one JSON object:
// {"adapter", "load_s": [...], "ms_per_step": [...]}.
import { launch, serve, status, waitFor } from "./common.mjs";
import path from "node:path";

const [site, runsArg, stepsArg] = process.argv.slice(2);
const runs = Number(runsArg || 3);
const steps = Number(stepsArg || 200);
const server = await serve(path.resolve(site));
const url = `http://127.0.0.1:${server.address().port}/index.html?steps=10`;
const out = { adapter: "", load_s: [], ms_per_step: [] };
try {
  for (let r = 0; r < runs; r++) {
    const browser = await launch();
    try {
      const page = await browser.newPage({ viewport: { width: 960, height: 600 } });
      const t0 = performance.now();
      await page.goto(url);
      const first = await waitFor(page, "first step", (s) => s.step > 0, 300);
      out.load_s.push((performance.now() - t0) / 1000);
      out.adapter = first.adapter;
      const a = await waitFor(page, "warm-up", (s) => s.step >= 20, 300);
      const ta = performance.now();
      const b = await waitFor(page, "timed steps", (s) => s.step >= a.step + steps, 600);
      out.ms_per_step.push((performance.now() - ta) / (b.step - a.step));
    } finally {
      await browser.close();
    }
  }
} finally {
  server.close();
}
console.log(JSON.stringify(out));
