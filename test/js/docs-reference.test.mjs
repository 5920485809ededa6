// The reference pages say what is true now: no dates, load figures or commit
// hashes in docs/*.md or README.md. Figures live in docs/benchmarks.md, which
// gives the load average of each run (its stated method) but no dates or
// commit hashes either; history lives in CHANGELOG.md (left out) and in
// commit messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

const months = 'January|February|March|April|May|June|July|August|September|October|November|December';
const hex = '(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}';
// Each kind of history, with what it must not be confused with.
const rules = [
  // 2026-12-02 is a date; 2027-06-30T00:00:00Z is an RFC 3339 instant of an
  // example (a token's expires), and a Worker's compatibility_date is a
  // setting's value.
  { kind: 'date', re: /(?<!compatibility_date`? ?)\b20\d\d-[01]\d-[0-3]\d\b(?!T)/g },
  { kind: 'date', re: new RegExp(`\\b\\d{1,2} (?:${months})\\b|\\b(?:${months}) \\d{1,2}(?:st|nd|rd|th)?,? \\d{4}\\b`, 'g') },
  { kind: 'load figure', re: /\bload(?: average)?(?: of| was| at)?(?: about)? \d/gi },
  // A revision given to a script's --baseline is a hash even in digits alone.
  { kind: 'commit hash', re: new RegExp(`\`${hex}\`|\\b(?:at|commit|of|from) ${hex}\\b|\\b${hex}'s\\b|--baseline[ =][0-9a-f]{7,40}\\b`, 'g') },
];

// What a page may hold that the others may not, by kind.
const allowed = { 'docs/benchmarks.md': new Set(['load figure']) };

function findings(text, allow = new Set()) {
  const out = [];
  text.split('\n').forEach((line, i) => {
    for (const { kind, re } of rules) {
      if (allow.has(kind)) continue;
      for (const m of line.matchAll(re)) out.push({ line: i + 1, kind, text: m[0] });
    }
  });
  return out;
}

test('the patterns find each kind of history, and leave reference values alone', () => {
  const history = [
    'Measured on 2026-12-02 (load 5.2 to 7.0)',
    'One run, 2 December 2026, load average 9.4 before',
    'December 2, 2026',
    'the baseline the build of `68fc4fa`, the commit before',
    'passed in CI at 3417ae1 without it',
    'built from commit 68fc4fa',
    "of ab11efb's `web/`",
    '`--baseline 3568503`',
  ];
  for (const h of history) assert.ok(findings(h).length > 0, `not found in: ${h}`);
  const reference = [
    '"expires": "2027-06-30T00:00:00Z"',
    '`compatibility_date` 2025-05-05 or later',
    '{"millis": 1796045771114, "domain": "coordinator"}',
    'a sustained load of writers',
    'loaded in Chromium',
    'the tokenSha256, 64 hex digits: e3b0c442 is not a commit',
    'about 1,024 bytes (`FenceReserve` 1024)',
  ];
  for (const r of reference) assert.deepEqual(findings(r), [], r);
  // benchmarks.md gives each run's load, and nothing else of history.
  const bench = allowed['docs/benchmarks.md'];
  assert.deepEqual(findings('Load average 4.5 to 7.2; load 22 to 27', bench), []);
  assert.ok(findings('Load average 4.5 to 7.2', new Set()).length > 0);
  for (const h of ['`--baseline 3568503`, at load 22 to 27', 'the package at commit 68fc4fa', 'Measured on 2026-12-02, load 5']) {
    assert.deepEqual(findings(h, bench).map((f) => f.kind).filter((k) => k === 'load figure'), [], h);
    assert.ok(findings(h, bench).length > 0, `not found in: ${h}`);
  }
});

test('the reference pages hold no dates, load figures or commit hashes', () => {
  const pages = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  pages.push('README.md');
  assert.ok(pages.length >= 8, `only ${pages.length} pages`);
  assert.ok(pages.includes('docs/benchmarks.md'), 'docs/benchmarks.md is checked');
  const found = pages.flatMap((p) => findings(readFileSync(join(root, p), 'utf8'), allowed[p])
    .map((f) => `${p}:${f.line}: ${f.kind}: ${f.text}`));
  assert.deepEqual(found, [], `history in the reference pages (move figures to docs/benchmarks.md, history to CHANGELOG.md):\n${found.join('\n')}`);
});
