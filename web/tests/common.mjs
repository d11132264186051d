// What the browser tests and the browser benchmark share: a static server,
// headless Chromium with WebGPU on SwiftShader, and the page's status line.
import { chromium } from "playwright-core";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".pellet": "application/octet-stream" };

/** A static server for `root` on a free port. */
export function serve(root) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://localhost");
    const file = path.join(root, decodeURIComponent(url.pathname));
    if (!file.startsWith(root) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404);
      res.end("not found");
      return;
    }
    res.writeHead(200, { "content-type": types[path.extname(file)] || "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Headless Chromium (CHROMIUM overrides /usr/bin/chromium) with WebGPU on
 * SwiftShader through Vulkan: with --disable-gpu, or GL, the canvas has no
 * shared-image path and Chromium destroys the device on the first frame. */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-vulkan=swiftshader",
      "--use-angle=vulkan"],
  });
}

/** The page's status JSON (its last line). */
export async function status(page) {
  const text = await page.textContent("#status");
  const last = text.trim().split("\n").pop();
  // Before the module runs, the page says only "loading…".
  try { return JSON.parse(last); } catch { return { step: 0, particles: 0, error: null, playing: false }; }
}

export async function waitFor(page, what, test, seconds) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const s = await status(page);
    if (test(s)) return s;
    if (s.error) throw new Error(`${what}: the page says: ${s.error}`);
    if (Date.now() > end) throw new Error(`${what}: not within ${seconds} s; status ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

