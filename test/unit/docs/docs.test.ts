import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../../../src/harness/paths.js';

/*
 * The README is the way in: short, and every page it and the docs point to is there.
 */

const root = (...parts: string[]) => path.join(PROJECT_ROOT, ...parts);
const DOCS = [
  'README.md',
  'ARCHITECTURE.md',
  'docker/README.md',
  ...readdirSync(root('docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('documentation', { timeout: 10_000 }, () => {
  it('the README stays short and points to each doc', () => {
    const readme = readFileSync(root('README.md'), 'utf8');
    const lines = readme.split('\n').length - 1;
    assert.ok(lines <= 150, `README.md has ${lines} lines (at most 150: move detail to docs/)`);
    for (const doc of [
      'GATEWAY',
      'NOSTR',
      'PRESSURE',
      'OPERATIONS',
      'CONFIGURATION',
      'BENCHMARKS',
    ]) {
      assert.match(
        readme,
        new RegExp(`\\(docs/${doc}\\.md\\)`),
        `README does not link docs/${doc}.md`,
      );
    }
  });

  it('every relative link of the README and the docs resolves to a file', () => {
    const broken: string[] = [];
    for (const doc of DOCS) {
      const text = readFileSync(root(doc), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1]!;
        if (/^(https?:|#|mailto:)/.test(link)) continue;
        const target = path.join(path.dirname(root(doc)), link.split('#')[0]!);
        if (!existsSync(target)) broken.push(`${doc}: ${link}`);
      }
    }
    assert.deepEqual(broken, []);
  });
});
