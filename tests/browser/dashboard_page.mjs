// Opens the dashboard of a starting or running job in Debian's Chromium (headless, driven by playwright-core
// from npm) and checks what a person would look at: the loss chart gains points while the job
// trains, the workers table highlights the straggler, the page says the job is running, and a
// screenshot is saved. With RANKS, also that the workers table has a row per rank and, above 16
// ranks, that the lateness chart draws the statistics lines instead of a line per rank.
//
//   node dashboard_page.mjs URL SCREENSHOT.png STRAGGLER_RANK [RANKS]
//
// STRAGGLER_RANK "-": no straggler is expected, none is checked.
// Exits 0 when every check held, 1 naming the first that did not (each wait has a timeout).
import { withPage } from "./with_page.mjs";

const [url, screenshot, stragglerRank, ranks] = process.argv.slice(2);
if (!url || !screenshot || stragglerRank === undefined) {
  console.error("usage: node dashboard_page.mjs URL SCREENSHOT.png STRAGGLER_RANK");
  process.exit(2);
}

/** Loads `url`, again every 250 ms while nothing listens there yet (the job is starting), for up to 60 s. */
async function gotoWhenServed(page, url) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      return await page.goto(url, { waitUntil: "load", timeout: 30000 });
    } catch (error) {
      if (!String(error).includes("ERR_CONNECTION_REFUSED") || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

await withPage("dashboard_page", { width: 1400, height: 1700 }, async (page) => {
  await gotoWhenServed(page, url);

  const points = async () => Number(await page.getAttribute("#loss-chart", "data-points")) || 0;
  await page.waitForFunction(() => Number(document.querySelector("#loss-chart")?.dataset.points) >= 3, null,
                             { timeout: 60000 });
  const before = await points();
  await page.waitForFunction((n) => Number(document.querySelector("#loss-chart").dataset.points) > n, before,
                             { timeout: 60000 });
  const after = await points();
  console.log(`loss chart: ${before} points, then ${after}`);

  const status = await page.textContent("#job-status");
  if (status.trim() !== "running") throw new Error(`#job-status says "${status}" while the job runs`);

  if (stragglerRank !== "-") {
    // One look at the table per check, never two reads: the page redraws it every window, and the
    // straggler rule may un-name a rank for a window when load on the machine hides its slowdown.
    const highlight = (rank) => {
      const table = document.querySelector("#workers-table");
      const row = table?.querySelector(`tr[data-rank="${rank}"]`);
      return { named: table?.dataset.straggler ?? "", rowClass: row?.className ?? "(no row)",
               highlighted: table ? table.querySelectorAll("tr.straggler").length : 0 };
    };
    try {
      await page.waitForFunction((rank) => {
        const table = document.querySelector("#workers-table");
        const row = table?.querySelector(`tr[data-rank="${rank}"]`);
        return table?.dataset.straggler === rank && row?.classList.contains("straggler") &&
               table.querySelectorAll("tr.straggler").length === 1;
      }, stragglerRank, { timeout: 60000 });
    } catch (error) {
      if (error?.name !== "TimeoutError") throw error;  // the page closed or crashed: say so
      const seen = await page.evaluate(highlight, stragglerRank);
      throw new Error(`rank ${stragglerRank} was not highlighted alone as the straggler within 60 s; last seen: ` +
                      `named "${seen.named}", its row's class "${seen.rowClass}", ${seen.highlighted} rows highlighted`);
    }
    console.log(`straggler highlighted: rank ${stragglerRank}`);
  }

  if (ranks !== undefined) {
    // The newest window's ranks arrive node by node, so a redraw between two nodes' reports lists
    // some of them: wait for one redraw that lists every rank.
    const rowSelector = "#workers-table tbody tr[data-rank]";
    const rowCount = () => page.locator(rowSelector).count();
    try {
      await page.waitForFunction(([selector, n]) => document.querySelectorAll(selector).length === n,
                                 [rowSelector, Number(ranks)], { timeout: 60000 });
    } catch (error) {
      if (error?.name !== "TimeoutError") throw error;
      throw new Error(`the workers table never listed ${ranks} rows within 60 s; last seen ${await rowCount()}`);
    }
    const rows = await rowCount();
    const legend = await page.textContent("#lateness-chart");
    if (Number(ranks) > 16 && (!legend.includes("median rank") || legend.includes("rank 1 ")))
      throw new Error(`the lateness chart of ${ranks} ranks should draw statistics lines: ${legend.slice(0, 200)}`);
    console.log(`workers: ${rows} rows; lateness: ${Number(ranks) > 16 ? "statistics lines" : "a line per rank"}`);
  }
  for (const id of ["loss-chart", "throughput-chart", "time-split-chart", "ring-chart", "lateness-chart"]) {
    const canvases = await page.locator(`#${id} canvas`).count();
    if (canvases === 0) throw new Error(`#${id} drew no chart`);
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${screenshot}`);
});
