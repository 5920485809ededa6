// The playground's pictures for a reader's eye, no check: every preset's end
// at 1280 px, in a 560-px-high iframe on an 820-px page, and at 390 px, into
// out/test/screenshots (`make screenshots-web`). The tests of test/web check
// the same pages (labels, contrast, axe-core, embeds) and take their own
// screenshots.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startServer, launch, openPage, load, SCREENSHOTS } from '../test/web/harness.mjs';
import { PRESETS } from '../web/model.js';

await mkdir(SCREENSHOTS, { recursive: true });
const server = await startServer();
const browser = await launch();
try {
  const toEnd = (page) =>
    page.evaluate(() => {
      const s = document.getElementById('scrubber');
      s.value = s.max;
      s.dispatchEvent(new Event('input', { bubbles: true }));
    });
  for (const preset of PRESETS) {
    for (const [width, height] of [[1280, 900], [390, 844]]) {
      const { page } = await openPage(browser.context, { width, height });
      await load(page, `${server.url}?p=${preset.id}`);
      await toEnd(page);
      await page.screenshot({ path: join(SCREENSHOTS, `end-${preset.id}-${width}.png`), fullPage: true });
      await page.close();
    }
    // An 820-px host page with the embed in a 560-px-high iframe.
    const page = await browser.context.newPage();
    await page.setViewportSize({ width: 820, height: 900 });
    await page.setContent(
      `<!doctype html><html lang="en"><head><title>host</title></head><body style="margin:10px">` +
        `<iframe src="${server.url}?p=${preset.id}&embed=1" title="lease-fence embed" width="100%" height="560" style="border:0"></iframe></body></html>`,
    );
    await page.frames().find((f) => f !== page.mainFrame()).waitForSelector('body.ready', { timeout: 15000 });
    await page.screenshot({ path: join(SCREENSHOTS, `end-${preset.id}-820-iframe-560.png`) });
    await page.close();
    console.log(`screenshots of ${preset.id}`);
  }
} finally {
  await browser.close();
  await server.close();
}
console.log(`in ${SCREENSHOTS}`);
