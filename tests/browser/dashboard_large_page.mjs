// Opens the dashboard of a job of many ranks (`troupe bench metrics --serve`: the real hub fed by
// simulated ranks) in Debian's Chromium and checks that the page stays bounded and readable:
// the loss chart gains points, the workers table lists the lowest rank, the straggler and the
// latest (saying of how many), the nodes table the lost node first (with counts by state), the
// lateness chart draws statistics over all ranks instead of a line per rank, and what the page
// loads stays in megabytes. It prints how long the first points took and the longest gap between
// animation frames while windows streamed in (measured, not judged).
//
//   node dashboard_large_page.mjs URL SCREENSHOT.png RANKS STRAGGLER_RANK LOST_NODE
//
// Exits 0 when every check held, 1 naming the first that did not (each wait has a timeout).
import { withPage } from "./with_page.mjs";

const [url, screenshot, ranksText, stragglerRank, lostNode] = process.argv.slice(2);
if (!url || !screenshot || !ranksText || stragglerRank === undefined || !lostNode) {
  console.error("usage: node dashboard_large_page.mjs URL SCREENSHOT.png RANKS STRAGGLER_RANK LOST_NODE");
  process.exit(2);
}
const ranks = Number(ranksText);

await withPage("dashboard_large_page", { width: 1400, height: 1900 }, async (page) => {
  let loaded = 0;  // bytes of the API answers the page fetched (not the stream)
  page.on("response", async (response) => {
    if (!response.url().includes("/api/") || response.url().includes("/api/stream")) return;
    try { loaded += (await response.body()).length; } catch { /* a navigation cancelled it */ }
  });
  const opened = Date.now();
  await page.goto(url, { waitUntil: "load", timeout: 30000 });
  await page.waitForFunction(() => Number(document.querySelector("#loss-chart")?.dataset.points) >= 3, null,
                             { timeout: 60000 });
  console.log(`first 3 loss points ${(Date.now() - opened) / 1000} s after opening`);

  const longestFrameGap = await page.evaluate(() => new Promise((resolve) => {
    let last = performance.now(), longest = 0;
    const until = last + 3000;
    const frame = (now) => {
      longest = Math.max(longest, now - last);
      last = now;
      if (now < until) requestAnimationFrame(frame); else resolve(longest);
    };
    requestAnimationFrame(frame);
  }));
  console.log(`longest gap between frames over 3 s of streaming: ${Math.round(longestFrameGap)} ms`);

  await page.waitForSelector(`#workers-table[data-straggler="${stragglerRank}"]`, { timeout: 60000 });
  const workerRows = await page.locator("#workers-table tbody tr").count();
  if (workerRows < 2 || workerRows > 12) throw new Error(`the workers table has ${workerRows} rows, expected 2 to 12`);
  const workersCaption = await page.textContent("#workers-caption");
  if (!workersCaption.includes(`of ${ranks}`)) throw new Error(`#workers-caption says "${workersCaption}"`);
  const rowClass = (await page.getAttribute(`#workers-table tr[data-rank="${stragglerRank}"]`, "class")) || "";
  if (!rowClass.split(/\s+/).includes("straggler")) throw new Error(`rank ${stragglerRank}'s row is not highlighted`);
  console.log(`workers: ${workerRows} rows, "${workersCaption}"`);

  await page.waitForFunction(() => (document.querySelector("#nodes-caption")?.textContent || "").includes("1 lost"),
                             null, { timeout: 60000 });
  const nodeRows = await page.locator("#nodes-table tbody tr").count();
  if (nodeRows > 64) throw new Error(`the nodes table has ${nodeRows} rows, expected at most 64`);
  if ((await page.locator(`#nodes-table tr[data-node="${lostNode}"].node-lost`).count()) !== 1)
    throw new Error(`the lost node ${lostNode} is not listed as lost`);
  console.log(`nodes: ${nodeRows} rows, "${await page.textContent("#nodes-caption")}"`);

  const legend = await page.textContent("#lateness-chart");
  for (const label of ["median rank", "p99 rank", "latest rank"])
    if (!legend.includes(label)) throw new Error(`the lateness chart has no "${label}" line: ${legend.slice(0, 200)}`);
  if (legend.includes("rank 1 ")) throw new Error("the lateness chart draws a line per rank");
  for (const id of ["loss-chart", "throughput-chart", "time-split-chart", "ring-chart", "lateness-chart"])
    if ((await page.locator(`#${id} canvas`).count()) === 0) throw new Error(`#${id} drew no chart`);

  console.log(`the page fetched ${(loaded / 1e6).toFixed(2)} MB from /api`);
  if (loaded > 20e6) throw new Error(`the page fetched ${loaded} bytes from /api, more than 20 MB`);
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
});
