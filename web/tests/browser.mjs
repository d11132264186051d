// The browser player in headless Chromium: the site loads and simulates, a
// screenshot shows particles, a tampered object is refused in the status
// line, and positions after N steps match the native GPU path to rounding.
//
//   node web/tests/browser.mjs SITE NATIVE_POSITIONS.json STEPS [SCREENSHOT.png]
//
// SITE is what `bash scripts/web.sh` wrote; NATIVE_POSITIONS.json holds the
// native GPU path's positions after STEPS steps (x, y, z, r per particle in
// id order: `cargo run -p pellet-web --example native_positions`). Prints one
// line per check and a JSON line of timings; exits non-zero on a failure.
import { launch, serve, status, waitFor } from "./common.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";

const [site, nativeFile, stepsArg, shotFile] = process.argv.slice(2);
if (!site || !nativeFile || !stepsArg) {
  console.error("usage: node browser.mjs SITE NATIVE_POSITIONS.json STEPS [SCREENSHOT.png]");
  process.exit(2);
}
const steps = Number(stepsArg);

/** The pixels of a PNG (8-bit RGB or RGBA, not interlaced). */
function decodePng(buf) {
  let at = 8, width = 0, height = 0, type = 0;
  const idat = [];
  while (at < buf.length) {
    const len = buf.readUInt32BE(at);
    const name = buf.toString("ascii", at + 4, at + 8);
    const data = buf.subarray(at + 8, at + 8 + len);
    if (name === "IHDR") { width = data.readUInt32BE(0); height = data.readUInt32BE(4); type = data[9]; }
    if (name === "IDAT") idat.push(data);
    at += 12 + len;
  }
  const bpp = type === 6 ? 4 : 3;
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const out = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? out[y * stride + x - bpp] : 0;
      const b = y > 0 ? out[(y - 1) * stride + x] : 0;
      const c = x >= bpp && y > 0 ? out[(y - 1) * stride + x - bpp] : 0;
      let v = row[x];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out[y * stride + x] = v & 255;
    }
  }
  return { width, height, bpp, pixels: out };
}

const browser = await launch();
let failed = 0;
const check = async (name, f) => {
  try { const note = await f(); console.log(`ok   ${name}${note ? ": " + note : ""}`); }
  catch (e) { failed++; console.log(`FAIL ${name}: ${e.message}`); }
};
const timings = {};
const root = path.resolve(site);
const server = await serve(root);
const base = `http://127.0.0.1:${server.address().port}`;
try {
  const page = await browser.newPage({ viewport: { width: 960, height: 600 } });
  await check("the site loads and simulates the ball pit", async () => {
    const t0 = Date.now();
    await page.goto(`${base}/index.html?steps=10`);
    const first = await waitFor(page, "first step", (s) => s.step > 0, 180);
    timings.load_to_first_step_s = (Date.now() - t0) / 1000;
    const later = await waitFor(page, "stepping", (s) => s.step >= first.step + 50, 180);
    timings.ms_per_step = later.ms_per_step;
    timings.adapter = later.adapter;
    timings.particles = later.particles;
    if (later.particles !== 4096) throw new Error(`${later.particles} particles`);
    return `${later.particles} particles, step ${later.step} on ${later.adapter}, ${later.ms_per_step.toFixed(2)} ms/step`;
  });
  await check("a screenshot shows particles", async () => {
    if (shotFile) await page.screenshot({ path: shotFile });
    await page.evaluate(() => { for (const id of ["panel", "status"]) document.getElementById(id).style.display = "none"; });
    const png = decodePng(await page.screenshot());
    const { width, height, bpp, pixels } = png;
    const counts = new Map();
    for (let i = 0; i < width * height; i++) {
      const key = pixels.readUIntBE(i * bpp, 3);
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    const background = [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
    const bg = [(background >> 16) & 255, (background >> 8) & 255, background & 255];
    let coloured = 0;
    for (let i = 0; i < width * height; i++) {
      const d = Math.max(...[0, 1, 2].map((k) => Math.abs(pixels[i * bpp + k] - bg[k])));
      if (d > 48) coloured++;
    }
    const share = coloured / (width * height);
    if (share < 0.01) throw new Error(`only ${(share * 100).toFixed(2)} % of the pixels differ from the background`);
    return `${(share * 100).toFixed(1)} % of the pixels are particles or walls`;
  });
  await check("positions after N steps match the native GPU path", async () => {
    const p = await browser.newPage({ viewport: { width: 640, height: 400 } });
    await p.goto(`${base}/index.html?steps=25&stop=${steps}`);
    await waitFor(p, "the stop", (s) => s.step === steps && !s.playing, 300);
    const got = await p.evaluate(async () => Array.from(await window.pellet.positions()));
    const want = JSON.parse(fs.readFileSync(nativeFile, "utf8"));
    if (got.length !== want.length) throw new Error(`${got.length / 4} particles, native ${want.length / 4}`);
    let worst = 0, at = 0;
    for (let i = 0; i < got.length; i++) {
      const d = Math.abs(got[i] - want[i]);
      if (d > worst) { worst = d; at = i; }
    }
    timings.parity_max_abs_diff_m = worst;
    // Rounding: a few ulps of the positions (metres, below 1).
    if (!(worst <= 1e-6)) throw new Error(`particle ${at >> 2} differs by ${worst} m`);
    await p.close();
    return `${got.length / 4} particles after ${steps} steps, largest difference ${worst} m`;
  });
  await check("?scene= plays another served folder (rigid bodies baked from a mesh)", async () => {
    if (!fs.existsSync(path.join(root, "pile", "manifest.pellet"))) throw new Error("no pile/ folder in the site");
    const p = await browser.newPage({ viewport: { width: 640, height: 400 } });
    await p.goto(`${base}/index.html?scene=pile/&steps=5`);
    const s = await waitFor(p, "the pile", (s) => s.step >= 10, 300);
    if (s.scene !== "pile/" || s.particles === 4096 || s.particles === 0) throw new Error(JSON.stringify(s));
    await p.close();
    return `${s.particles} particles in rigid bodies, step ${s.step}`;
  });
  await check("a tampered object is refused in the status line", async () => {
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), "pellet-tampered-"));
    fs.cpSync(root, copy, { recursive: true });
    const objects = fs.readdirSync(path.join(copy, "scene")).filter((f) => f.endsWith(".pellet") && f !== "manifest.pellet");
    const victim = path.join(copy, "scene", objects[0]);
    const bytes = fs.readFileSync(victim);
    bytes[bytes.length - 1] ^= 1;
    fs.writeFileSync(victim, bytes);
    const tampered = await serve(copy);
    try {
      const p = await browser.newPage();
      await p.goto(`http://127.0.0.1:${tampered.address().port}/index.html`);
      const end = Date.now() + 120000;
      let s;
      do { s = await status(p); await new Promise((r) => setTimeout(r, 100)); } while (!s.error && Date.now() < end);
      if (!s.error || !/hash/.test(s.error)) throw new Error(`status ${JSON.stringify(s)}`);
      if (s.step !== 0 || s.particles !== 0) throw new Error("it simulated anyway");
      await p.close();
      return s.error;
    } finally {
      tampered.close();
      fs.rmSync(copy, { recursive: true, force: true });
    }
  });
} finally {
  server.close();
  await browser.close();
}
console.log(JSON.stringify(timings));
process.exit(failed ? 1 : 0);
