// The links between the pages resolve: every relative link of README.md,
// CHANGELOG.md and docs/*.md names a file of the repository, and every
// #anchor (on the same page or another) names a heading of the page it points
// into, as GitHub makes them (lower case; punctuation but - and _ dropped;
// spaces to -; a repeated heading gets -1, -2, ...).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

// Blanks the fenced blocks (keeping the lines counted), so that a heading or
// a link shown inside one is not taken for the page's own.
function prose(text) {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, (b) => b.replace(/[^\n]/g, ''));
}

export function anchors(text) {
  const seen = new Map();
  const out = new Set();
  for (const m of prose(text).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const slug = m[1]
      .replace(/<[^>]+>/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

// [text](target) outside code spans and fenced blocks, with their line.
export function links(text) {
  const out = [];
  prose(text).split('\n').forEach((line, i) => {
    const bare = line.replace(/`[^`]*`/g, '');
    for (const m of bare.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) out.push({ line: i + 1, target: m[1] });
  });
  return out;
}

test('the slugs and links are read as GitHub reads them', () => {
  const a = anchors('# Durable state (the default)\n## `-ui`: the console\n## Limits\n## Limits\n```\n# not a heading\n```\n');
  assert.deepEqual([...a], ['durable-state-the-default', '-ui-the-console', 'limits', 'limits-1']);
  assert.deepEqual(links('see [a](b.md#c) and `[x](y)` and [d](https://e/f)').map((l) => l.target), ['b.md#c', 'https://e/f']);
});

const pages = ['README.md', 'CHANGELOG.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
  .filter((p) => existsSync(join(root, p)));

test('every relative link and #anchor of the pages resolves', () => {
  assert.ok(pages.length >= 10, `only ${pages.length} pages`);
  const bad = [];
  let checked = 0;
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const { line, target } of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      checked++;
      const [path, anchor] = target.split('#');
      const file = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
      if (!existsSync(join(root, file))) {
        bad.push(`${page}:${line}: ${target}: no file ${file}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!file.endsWith('.md')) {
        bad.push(`${page}:${line}: ${target}: an anchor into a file that is not a page`);
        continue;
      }
      if (!anchors(readFileSync(join(root, file), 'utf8')).has(anchor)) bad.push(`${page}:${line}: ${target}: no heading #${anchor} in ${file}`);
    }
  }
  assert.ok(checked >= 20, `only ${checked} relative links`);
  assert.deepEqual(bad, [], `links that do not resolve:\n${bad.join('\n')}`);
});
