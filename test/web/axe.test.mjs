// axe-core over the playground and embed mode, at the start, middle and end
// of every preset, in headless Chromium: the longest of the explainer's
// checks (explainer.test.mjs), in a file of its own so that make test runs
// it beside the rest (test-web-axe).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useBrowser, openPage, load, goTo, atEach } from './harness.mjs';
import { axe, a11yKinds } from './checks.mjs';
import { PRESETS } from '../../web/model.js';

const web = useBrowser();

// Each preset is loaded afresh (its own document, from its URL) into one
// tab per mode: a new tab per preset cost Chromium a new renderer, and
// axe-core's first run in it, several seconds of CPU each time. axe-core
// runs at the positions that show a kind of element no earlier one showed
// (checks.mjs a11yKinds), in each mode; the first position of each mode
// is always checked.
test('axe-core: no serious or critical violations on the playground and in embed mode, at the start, middle and end of every preset', async () => {
  let positions = 0;
  let axeRuns = 0;
  for (const embed of [false, true]) {
    const { page } = await openPage(web.browser.context, { width: embed ? 820 : 1280, height: 900 });
    const seen = new Set();
    for (const preset of PRESETS) {
      await load(page, `${web.server.url}?p=${preset.id}${embed ? '&embed=1&at=0' : ''}`);
      assert.equal(await page.evaluate(() => typeof window.axe), 'undefined', 'a fresh document');
      const last = await goTo(page, 0);
      for (const i of [0, Math.floor(last / 2), last]) {
        const [shown] = (await atEach(page, [i], a11yKinds)).results;
        positions++;
        if (!shown.some((k) => !seen.has(k))) continue;
        const v = await axe(page);
        assert.deepEqual(v, [], `${embed ? 'embed' : 'playground'} ${preset.id} step ${i}`);
        for (const k of shown) seen.add(k);
        axeRuns++;
      }
    }
    await page.close();
  }
  assert.equal(positions, PRESETS.length * 6);
  console.log(`axe-core: ${axeRuns} of ${positions} positions`);
  assert.ok(axeRuns >= PRESETS.length, `axe-core ran at only ${axeRuns} positions`);
});
