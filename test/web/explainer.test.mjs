// The playground as an explainer, in headless Chromium: captions and
// verdicts, the failure drawn, the first frame, labels that never collide,
// contrast computed for every SVG text, axe-core on the tour (on the
// playground and in embed mode: axe.test.mjs), and embeds in an iframe. The screenshots of every
// preset's end are taken by scripts/screenshots-web.mjs (make
// screenshots-web): they check nothing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useBrowser, load, goTo, atEach, SCREENSHOTS, ROOT } from './harness.mjs';
import { labelProblems, axe } from './checks.mjs';
import { PRESETS } from '../../web/model.js';

const web = useBrowser();

/** Opens query in a tab (reused: harness.mjs tabs); done(page) gives it back. */
const open = (query, viewport = { width: 1280, height: 800 }) => web.tab.open(web.server.url + query, viewport);
const done = (page) => web.tab.done(page);

/** Opens query at the end of its run (as the To end button would). */
async function openEnd(query, viewport) {
  const o = await open(query, viewport);
  await goTo(o.page, -1);
  return o;
}

const shot = (page, name) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });

/** Chooses preset id in the form and waits until its run is shown. */
async function choose(page, id) {
  await page.selectOption('#preset', id);
  await page.waitForFunction((id) => document.body.dataset.preset === id && !document.body.classList.contains('busy'), id);
}


// In the page: the contrast of every SVG text against what is drawn behind
// it, sampled at five points of its box and composited as the browser
// paints it (fills with their opacity over the page background).
function svgContrast() {
  const parse = (c) => {
    const m = c.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return { r, g, b, a };
  };
  const over = (top, a, bottom) => ({ r: top.r * a + bottom.r * (1 - a), g: top.g * a + bottom.g * (1 - a), b: top.b * a + bottom.b * (1 - a) });
  const lum = ({ r, g, b }) => {
    const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ratio = (x, y) => {
    const [hi, lo] = [lum(x), lum(y)].sort((p, q) => q - p);
    return (hi + 0.05) / (lo + 0.05);
  };
  const opacity = (el, stop) => {
    let o = 1;
    for (let n = el; n && n !== stop.parentNode; n = n.parentNode) if (n.nodeType === 1) o *= Number(getComputedStyle(n).opacity);
    return o;
  };
  const pageBg = (el) => {
    for (let n = el; n && n.nodeType === 1; n = n.parentNode) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c && c.a > 0) return c;
    }
    return { r: 255, g: 255, b: 255 };
  };
  const out = [];
  for (const svg of document.querySelectorAll('.lane svg')) {
    const base = pageBg(svg.parentNode);
    for (const t of svg.querySelectorAll('text')) {
      const rects = t.getClientRects();
      if (!rects.length) continue;
      const r = t.getBoundingClientRect();
      const cs = getComputedStyle(t);
      const fill = parse(cs.fill);
      const alpha = opacity(t, svg) * Number(cs.fillOpacity) * fill.a;
      let worst = Infinity;
      for (const [fx, fy] of [[0.5, 0.5], [0.2, 0.4], [0.8, 0.4], [0.2, 0.7], [0.8, 0.7]]) {
        const px = r.left + r.width * fx;
        const py = r.top + r.height * fy;
        if (px < 0 || py < 0 || px >= innerWidth || py >= innerHeight) continue;
        // The painted areas under the point: filled shapes (a group, a line or
        // a text paints no area of its own behind other text).
        const stack = document.elementsFromPoint(px, py).filter((e) => svg.contains(e) && ['rect', 'circle', 'ellipse', 'path', 'polygon', 'polyline'].includes(e.tagName));
        let bg = base;
        for (const shape of stack.reverse()) {
          const scs = getComputedStyle(shape);
          const f = parse(scs.fill);
          if (!f || scs.fill === 'none') continue;
          bg = over(f, f.a * Number(scs.fillOpacity) * opacity(shape, svg), bg);
        }
        const fg = over(fill, alpha, bg);
        worst = Math.min(worst, ratio(fg, bg));
      }
      if (worst !== Infinity) out.push({ text: t.textContent, ratio: Math.round(worst * 100) / 100 });
    }
  }
  return out;
}

// --- captions, verdicts and the failure ---------------------------------------

test('every step has its own caption, in an aria-live region; the end shows a verdict per lane', async () => {
  const { page, errors } = await open('?p=gap');
  assert.equal(await page.getAttribute('#caption', 'aria-live'), 'polite');
  const shown = () => ({ caption: document.getElementById('caption').textContent, verdicts: [...document.querySelectorAll('.verdict')].map((v) => (v.hidden ? null : v.textContent)) });
  const { last, results } = await atEach(page, null, shown);
  const captions = results.map((r) => r.caption);
  for (const [i, { verdicts }] of results.entries()) if (i < last) assert.deepEqual(verdicts, [null, null], `verdict shown at step ${i}`);
  assert.match(captions[0], /^Press Play/);
  for (let i = 1; i <= last; i++) {
    assert.ok(captions[i].length > 20, `caption ${i}: ${captions[i]}`);
    assert.notEqual(captions[i], captions[i - 1], `step ${i} has the caption of step ${i - 1}`);
  }
  assert.ok(captions.some((c) => /Naive: A's write \(no token\) lands over B's\. A's lease ended at 1000/.test(c)), captions.join('\n'));
  assert.ok(captions.some((c) => /Fenced: The gate refuses A's write: fence 1 < floor 2/.test(c)));
  assert.equal(await page.textContent('#verdict-naive'), "Naive: A's write from an expired lease overwrote B's, and nothing noticed.");
  assert.equal(await page.textContent('#verdict-fenced'), 'Fenced: fence 1 < floor 2, refused and logged (rejection #1); the resource keeps "B\'s report".');
  // The changed element of the last step is outlined in each lane.
  assert.equal(await page.locator('#svg-naive rect.hl').count(), 1);
  assert.equal(await page.locator('#svg-fenced g.ev-write.changed').count(), 1);
  assert.deepEqual(errors, []);
  done(page);
});

test('the failure is drawn: the stale window, the stale write, tokens, the floor, the refusal', async () => {
  const { page } = await openEnd('?p=gap');
  const lane = (mode) =>
    page.evaluate((mode) => {
      const svg = document.querySelector(`#svg-${mode} svg`);
      const texts = (kind) => [...svg.querySelectorAll(`text[data-kind="${kind}"]`)].map((t) => t.textContent);
      return {
        windows: [...svg.querySelectorAll('rect.window')].map((r) => [r.dataset.holder, Number(r.dataset.from), Number(r.dataset.to)]),
        windowLabels: texts('window'),
        writes: [...svg.querySelectorAll('g.ev-write')].map((g) => [g.dataset.actor, g.dataset.status, getComputedStyle(g.querySelector('line')).stroke]),
        tokens: texts('token'),
        outcomes: texts('outcome'),
        floors: texts('floor'),
        floor: svg.querySelector('g.floor')?.dataset.floor ?? null,
        floorPoints: svg.querySelector('g.floor polyline')?.getAttribute('points').split(' ').length ?? 0,
      };
    }, mode);
  const naive = await lane('naive');
  const fenced = await lane('fenced');
  assert.deepEqual(naive.windows, [['A', 1000, 1400]]);
  assert.deepEqual(fenced.windows, [['A', 1000, 1400]]);
  assert.deepEqual(naive.windowLabels, ['A still believes in fence 1; the coordinator let it go at 1000']);
  assert.deepEqual(naive.writes.map((w) => w.slice(0, 2)), [['B', 'ok'], ['A', 'stale']]);
  assert.equal(naive.writes[1][2], 'rgb(185, 28, 28)', 'the stale write is drawn in the warning colour');
  assert.notEqual(naive.writes[0][2], naive.writes[1][2]);
  assert.deepEqual(naive.tokens, ['write, no token', 'write, no token']);
  assert.deepEqual(naive.outcomes.sort(), ['B lands', '⚠ A lands, stale']);
  assert.equal(naive.floor, null, 'the naive resource has no floor');
  assert.deepEqual(fenced.writes.map((w) => w.slice(0, 2)), [['B', 'ok'], ['A', 'refused']]);
  assert.deepEqual(fenced.tokens, ['write, fence 2', 'write, fence 1']);
  assert.deepEqual(fenced.outcomes.sort(), ['1 < 2 → refused', 'B lands']);
  assert.deepEqual(fenced.floors, ['floor 2']);
  assert.equal(fenced.floor, '2');
  assert.ok(fenced.floorPoints >= 4, 'the floor is a step line');
  done(page);
});

test('renewal: the belief lines up under the coordinator\'s lease and the difference is labelled', async () => {
  const { page } = await openEnd('?p=renewal');
  const beliefs = (mode) => page.$$eval(`#svg-${mode} text[data-kind="belief"]`, (ts) => ts.map((t) => t.dataset.full ?? t.textContent));
  assert.deepEqual(await beliefs('naive'), ['A believes 860 ms too long']);
  assert.deepEqual(await beliefs('fenced'), ["40 ms inside the coordinator's"]);
  const win = await page.$$eval('#svg-naive rect.window', (rs) => rs.map((r) => [Number(r.dataset.from), Number(r.dataset.to)]));
  assert.deepEqual(win, [[1040, 1900]]);
  // The belief bars sit under the coordinator's bar, on the same time axis.
  const geo = await page.evaluate(() => {
    const svg = document.querySelector('#svg-naive svg');
    const gen = svg.querySelector('g.gen[data-holder="A"] rect').getBoundingClientRect();
    const belief = svg.querySelector('g.ev-lease[data-actor="A"] rect').getBoundingClientRect();
    return { genLeft: gen.left, beliefLeft: belief.left, genBottom: gen.bottom, beliefTop: belief.top };
  });
  assert.ok(Math.abs(geo.genLeft - geo.beliefLeft) < 1);
  assert.ok(geo.beliefTop >= geo.genBottom && geo.beliefTop - geo.genBottom < 20);
  done(page);
});

test('skew at least the TTL: a warning, and the fenced lease drawn dead on arrival', async () => {
  const { page, errors } = await openEnd('?p=gap&skew=1200');
  assert.equal(await page.isVisible('#warnings'), true);
  assert.match(await page.textContent('#warnings'), /assumed clock skew \(1200 ms\) is at least the TTL \(1000 ms\).*expired on arrival/);
  const dead = await page.$$eval('#svg-fenced text[data-kind="belief"]', (ts) => ts.map((t) => t.textContent));
  assert.ok(dead.includes('dead on arrival (deadline -200)'), dead.join(' | '));
  // The axis reaches back to the negative deadline instead of piling it on 0.
  const xs = await page.evaluate(() => {
    const svg = document.querySelector('#svg-fenced svg');
    const zero = [...svg.querySelectorAll('text[data-kind="tick"]')].find((t) => t.textContent === '0');
    return { zero: Number(zero.getAttribute('x')), dead: Number(svg.querySelector('line.deadline.dead[data-deadline="-200"]').getAttribute('x1')) };
  });
  assert.ok(xs.dead < xs.zero - 5, JSON.stringify(xs));
  const ok = await open('?p=gap&skew=999');
  assert.equal(await ok.page.isVisible('#warnings'), false);
  assert.deepEqual(errors, []);
  done(page);
  done(ok.page);
});

test('the cursor is drawn behind the events', async () => {
  const { page } = await open('?p=gap&at=8');
  const order = await page.evaluate(() => {
    const svg = document.querySelector('#svg-naive svg');
    const all = [...svg.querySelectorAll('*')];
    return { cursor: all.indexOf(svg.querySelector('.cursor')), firstEvent: all.indexOf(svg.querySelector('g.events g.ev')) };
  });
  assert.ok(order.cursor >= 0 && order.cursor < order.firstEvent, JSON.stringify(order));
  done(page);
});

test('the first frame: a prompt, a big Play and the run ghosted, on desktop and on a phone', async () => {
  for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
    const { page } = await open('?p=renewal', viewport);
    assert.match(await page.textContent('#caption'), /^Press Play \(or Step\) to watch it happen, one event at a time\. The faint drawing/);
    const big = await page.locator('#play-big').boundingBox();
    assert.ok(big && big.y + big.height <= viewport.height, `Play is not in the first screen at ${viewport.width}px`);
    const cap = await page.locator('#caption').boundingBox();
    assert.ok(cap.y + 20 <= viewport.height);
    assert.ok((await page.locator('#svg-naive g.ghost g.ev').count()) > 5, 'the whole run is ghosted behind');
    assert.equal(await page.locator('#svg-naive g.ghost text').count(), 0, 'ghosts carry no text');
    await shot(page, `first-frame-${viewport.width}`);
    await page.click('#play-big');
    assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'true');
    assert.equal(await page.isVisible('#play-big'), false);
    done(page);
  }
});

test('the event lists are focusable, named, and follow the run', async () => {
  const { page } = await open('?p=restart');
  const last = await goTo(page, 0);
  for (const i of [Math.floor(last / 2), last]) {
    await goTo(page, i);
    for (const id of ['log-naive', 'log-fenced']) {
      const s = await page.evaluate((id) => {
        const ol = document.getElementById(id);
        const cur = ol.querySelector('li[aria-current="step"]');
        return {
          tabindex: ol.tabIndex,
          label: ol.getAttribute('aria-label'),
          scrolls: ol.scrollHeight > ol.clientHeight,
          isLast: cur === ol.lastElementChild,
          visible: cur ? cur.offsetTop >= ol.scrollTop - 1 && cur.offsetTop + cur.offsetHeight <= ol.scrollTop + ol.clientHeight + 1 : false,
        };
      }, id);
      assert.equal(s.tabindex, 0, id);
      assert.match(s.label, /lane events$/);
      assert.equal(s.isLast, true);
      assert.equal(s.visible, true, `${id} at ${i}: the current event is scrolled out of view`);
      if (i === last) assert.equal(s.scrolls, true, `${id} should be long enough to scroll at the end`);
    }
  }
  done(page);
});

// --- labels, contrast, axe: every preset ------------------------------------

for (const width of [1280, 390]) {
  test(`no two labels overlap and no key label is left out, at every step of every preset, ${width} px`, async () => {
    const { page } = await open('?p=gap', { width, height: 900 });
    for (const preset of PRESETS) {
      await choose(page, preset.id);
      const { last, results } = await atEach(page, null, labelProblems);
      assert.equal(results.length, last + 1);
      results.forEach((problems, i) => assert.deepEqual(problems, [], `${preset.id} at step ${i} of ${last}`));
    }
    done(page);
  });
}

test('every SVG text has a contrast of at least 4.5:1, at the start, middle and end of every preset', async () => {
  const { page } = await open('?p=gap', { width: 1280, height: 1000 });
  let measured = 0;
  let lowest = Infinity;
  for (const preset of PRESETS) {
    await choose(page, preset.id);
    const last = await goTo(page, 0);
    for (const i of [0, Math.floor(last / 2), last]) {
      await goTo(page, i);
      await page.locator('#lanes').scrollIntoViewIfNeeded();
      for (const mode of ['naive', 'fenced']) {
        await page.locator(`#lane-${mode} .timeline`).scrollIntoViewIfNeeded();
        const results = await page.evaluate(svgContrast);
        for (const r of results) {
          assert.ok(r.ratio >= 4.5, `${preset.id} step ${i}: "${r.text}" has contrast ${r.ratio}`);
          lowest = Math.min(lowest, r.ratio);
        }
        measured += results.length;
      }
    }
  }
  assert.ok(measured > 500, `only ${measured} texts measured`);
  console.log(`contrast: ${measured} SVG text measurements, lowest ${lowest.toFixed(2)}:1`);
  done(page);
});

// --- embeds -----------------------------------------------------------------

/** A host page (about:blank) with one iframe of the embed, which resizes it on the page's message. */
async function host(width, frame, query, resize) {
  const page = await web.browser.context.newPage();
  await page.setViewportSize({ width, height: 900 });
  const src = web.server.url + query;
  await page.setContent(
    `<!doctype html><html lang="en"><head><title>host</title></head><body style="margin:10px">` +
      `<iframe id="f" src="${src}" title="lease-fence embed" width="${frame.width}" height="${frame.height}" style="border:0"></iframe>` +
      `<script>window.heights = []; addEventListener('message', (e) => { if (e.data?.type !== 'lease-fence:height') return;` +
      ` window.heights.push(e.data.height); ${resize ? "document.getElementById('f').style.height = e.data.height + 'px';" : ''} });</script></body></html>`,
  );
  const fr = page.frames().find((f) => f !== page.mainFrame());
  await fr.waitForSelector('body.ready', { timeout: 120_000 });
  return { page, frame: fr };
}

test('in a 560-px-high iframe, both lanes, the caption and the verdicts are visible without scrolling', async () => {
  for (const [hostWidth, frameWidth] of [[820, '100%'], [820, 560], [1280, '100%']]) {
    const { page, frame } = await host(hostWidth, { width: frameWidth, height: 560 }, '?p=gap&embed=1', false);
    const boxes = await frame.evaluate(() =>
      ['#title', '#caption', '#verdict-naive', '#verdict-fenced', '#svg-naive svg', '#svg-fenced svg'].map((sel) => {
        const r = document.querySelector(sel).getBoundingClientRect();
        return { sel, bottom: r.bottom, right: r.right, height: r.height };
      }),
    );
    const inner = await frame.evaluate(() => ({ h: innerHeight, w: innerWidth, sw: document.documentElement.scrollWidth }));
    for (const b of boxes) {
      assert.ok(b.height > 0, `${b.sel} is empty`);
      assert.ok(b.bottom <= inner.h + 0.5, `${hostWidth}/${frameWidth}: ${b.sel} ends at ${b.bottom}, below the ${inner.h}px frame`);
      assert.ok(b.right <= inner.w + 0.5, `${b.sel} is cut off at the right`);
    }
    assert.ok(inner.sw <= inner.w, 'the embed scrolls sideways');
    await page.close();
  }
});

test('embed mode: no two labels overlap and no key label is left out, at the end of every preset, 820 and 560 px wide', async () => {
  for (const width of [820, 560]) {
    const { page } = await open('?p=gap&embed=1', { width, height: 700 });
    for (const preset of PRESETS) {
      // An embed opens at the end of its run.
      await load(page, `${web.server.url}?p=${preset.id}&embed=1`);
      assert.deepEqual(await page.evaluate(labelProblems), [], `${preset.id} at ${width}px`);
    }
    done(page);
  }
});

test('the embed tells its host its height, and the documented snippet resizes the frame to it', async () => {
  const { page, frame } = await host(820, { width: '100%', height: 300 }, '?p=restart&embed=1', true);
  await page.waitForFunction(() => window.heights.length > 0);
  const docHeight = await frame.evaluate(() => Math.ceil(document.documentElement.getBoundingClientRect().height));
  const heights = await page.evaluate(() => window.heights);
  assert.equal(heights.at(-1), docHeight);
  const frameHeight = await page.evaluate(() => document.getElementById('f').getBoundingClientRect().height);
  assert.equal(Math.round(frameHeight), docHeight);
  // Nothing scrolls inside the resized frame.
  assert.equal(await frame.evaluate(() => document.documentElement.scrollHeight <= innerHeight), true);
  // The page never asks a host for more than it shows: a resize settles.
  const before = heights.length;
  await frame.evaluate(() => document.getElementById('step').click());
  await page.waitForTimeout(100);
  assert.ok((await page.evaluate(() => window.heights.length)) - before <= 2);
  // The documented snippet is the one tested here.
  const doc = await readFile(join(ROOT, 'docs', 'playground.md'), 'utf8');
  assert.match(doc, /lease-fence:height/);
  assert.match(doc, /e\.source/);
  await page.close();
});

test('no horizontal scrollbar from 320 to 1600 px, in embed mode and on the playground', async () => {
  for (const embed of [true, false]) {
    const { page } = await openEnd(`?p=renewal${embed ? '&embed=1' : ''}`, { width: 320, height: 800 });
    for (let width = 320; width <= 1600; width += 40) {
      await page.setViewportSize({ width, height: 800 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const s = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth - innerWidth,
        plots: [...document.querySelectorAll('.plot')].map((p) => p.scrollWidth - p.clientWidth),
      }));
      assert.ok(s.page <= 0, `${embed ? 'embed' : 'playground'} at ${width}px: the page is ${s.page}px too wide`);
      // On the playground a phone-sized timeline may scroll inside its box (its row labels stay); from 640 px up it fits.
      if (embed || width >= 640) assert.deepEqual(s.plots.filter((d) => d > 0), [], `${embed ? 'embed' : 'playground'} at ${width}px: a timeline scrolls`);
    }
    done(page);
  }
});

test('phone: the row labels stay in view while the timeline scrolls', async () => {
  const { page } = await openEnd('?p=gap', { width: 390, height: 844 });
  const before = await page.locator('#rows-fenced svg').boundingBox();
  const scrolled = await page.evaluate(() => {
    const p = document.getElementById('svg-fenced');
    p.scrollLeft = 0;
    const a = p.scrollWidth > p.clientWidth;
    p.scrollLeft = p.scrollWidth;
    return a && p.scrollLeft > 0;
  });
  assert.equal(scrolled, true, 'the timeline scrolls on a phone');
  const after = await page.locator('#rows-fenced svg').boundingBox();
  assert.deepEqual(after, before);
  const names = await page.$$eval('#rows-fenced text', (ts) => ts.map((t) => t.textContent));
  for (const n of ['Agent A', 'Agent B', 'Coordinator', 'Resource']) assert.ok(names.includes(n));
  done(page);
});

// --- the tour -----------------------------------------------------------------

test('the tour: linked from the playground, one embedded preset per section, frames sized by their pages, axe clean', async () => {
  const play = await open('');
  assert.equal(await play.page.getAttribute('.intro a[href="tour.html"]', 'href'), 'tour.html');
  done(play.page);
  const { page, errors, requests } = await open('tour.html', { width: 1280, height: 900 });
  const sections = await page.$$eval('main section', (ss) =>
    ss.map((s) => ({ id: s.id, h2: s.querySelector('h2')?.textContent, frames: [...s.querySelectorAll('iframe')].map((f) => [f.getAttribute('src'), f.title]) })),
  );
  const framed = sections.filter((s) => s.frames.length);
  assert.deepEqual(framed.map((s) => s.id), ['gap', 'renewal', 'lost', 'expired', 'restart', 'early', 'async']);
  for (const s of framed) {
    assert.equal(s.frames.length, 1, s.id);
    const [src, title] = s.frames[0];
    assert.equal(src, `./?p=${s.id}&embed=1&at=0`);
    assert.ok(PRESETS.some((p) => p.id === s.id), `no preset ${s.id}`);
    assert.ok(title.length > 10);
  }
  assert.equal(await page.locator('h1').count(), 1);
  // Bring every (lazy) frame in, and wait until each has reported its height and been fitted to it.
  for (const s of framed) {
    await page.locator(`#${s.id} iframe`).scrollIntoViewIfNeeded();
    const frame = await (await page.$(`#${s.id} iframe`)).contentFrame();
    await frame.waitForSelector('body.ready', { timeout: 120_000 });
    assert.equal(await frame.evaluate(() => document.querySelectorAll('#notice-list li').length), 0, `${s.id}: the embed complains`);
    await page.waitForFunction(
      (id) => {
        const f = document.querySelector(`#${id} iframe`);
        const inner = f.contentDocument?.documentElement.getBoundingClientRect().height;
        return inner && Math.abs(f.clientHeight - Math.ceil(inner)) <= 1;
      },
      s.id,
      { timeout: 10000 },
    );
  }
  assert.deepEqual(await axe(page), []);
  const origin = new URL(web.server.url).origin;
  for (const r of requests) assert.equal(new URL(r).origin, origin, r);
  await shot(page, 'tour-1280');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), 'the tour scrolls sideways at 390 px');
  assert.deepEqual(errors, []);
  done(page);
});
