// What every browser test of the dashboard does around its checks: Debian's Chromium, headless,
// driven by playwright-core; a page whose uncaught errors fail the test; the browser closed
// however the checks end; exit status 0 when they held, 1 naming the first that did not.
import { chromium } from "playwright-core";

/** Runs `checks(page)` on a new page of `viewport` and exits the process with its verdict. */
export async function withPage(name, viewport, checks) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  let failed = false;
  try {
    const page = await browser.newPage({ viewport });
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    await checks(page);
    if (errors.length) throw new Error(`the page threw: ${errors.join("; ")}`);
  } catch (error) {
    console.error(`${name}: ${error.message}`);
    failed = true;
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}
