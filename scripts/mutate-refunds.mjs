#!/usr/bin/env node
/* global console, process */
// Mutation check of the charge plan's refunds (issue 31): removes each refund in
// dist/src/write/charge-plan.js in turn (the lines marked `// refund: <name>`), runs the tests
// that hold the write path, and fails unless every mutation makes at least one test fail.
// Run after a build: node scripts/mutate-refunds.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const target = 'dist/src/write/charge-plan.js';
const tests = [
  'dist/test/unit/write/charge-plan.test.js',
  'dist/test/unit/gateway/write-transports.test.js',
  'dist/test/unit/nostr/nostr-hashed-path.test.js',
  'dist/test/unit/quota/pubkey-tiers.test.js',
  'dist/test/unit/quota/node-budget.test.js',
];
const original = readFileSync(target, 'utf8');
const lines = original.split('\n');
const sites = lines.flatMap((line, i) => {
  const m = /\/\/ refund: ([\w-]+)/.exec(line);
  return m ? [{ i, name: m[1] }] : [];
});
if (sites.length === 0) throw new Error(`no refund sites marked in ${target}`);
let survived = 0;
try {
  for (const { i, name } of sites) {
    const mutated = [...lines];
    // `await this.release();` or `return this.giveBackAll(x).then(...)`: the refund not made.
    mutated[i] = mutated[i]
      .replace(/await this\.\w+\([^;]*\);/, 'void 0;')
      .replace(/this\.giveBackAll\(\w+\)\.then/, 'Promise.resolve().then');
    if (mutated[i] === lines[i]) throw new Error(`cannot mutate line ${i + 1}: ${lines[i]}`);
    writeFileSync(target, mutated.join('\n'));
    const failed = [];
    for (const test of tests) {
      try {
        execFileSync('node', ['--test', '--test-timeout=120000', test], { stdio: 'pipe' });
      } catch {
        failed.push(test.replace(/^dist\/test\//, ''));
      }
    }
    if (failed.length === 0) survived++;
    console.log(`${name}: ${failed.length ? `killed by ${failed.join(', ')}` : 'SURVIVED'}`);
  }
} finally {
  writeFileSync(target, original);
}
console.log(`${sites.length} refunds removed one at a time, ${survived} survived`);
process.exit(survived === 0 ? 0 : 1);
