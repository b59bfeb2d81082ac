/**
 * `sluice bench verify`: the correctness cases every verifier must pass before it is timed
 * (and the gateway's verifier does), the worker-thread pool's verdicts, and a candidate that
 * accepts what it should not being left out of the timing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import { correctnessCases, runVerifyBench } from '../../../src/bench/verify-bench.js';
import type { SchnorrCandidate } from '../../../src/bench/verify-candidates.js';
import { VerifyPool } from '../../../src/bench/verify-pool.js';
import { initSignatureVerifier, verifySignature } from '../../../src/nostr/verify.js';

const KEY = generateSecretKey();
const TEXTS = [0, 1, 2].map((i) =>
  JSON.stringify(
    finalizeEvent({ kind: 1, created_at: 1_700_000_000 + i, tags: [], content: `note ${i}` }, KEY),
  ),
);
const CASES = correctnessCases(TEXTS);
const fresh = (event: Event) => JSON.parse(JSON.stringify(event)) as Event;

describe('bench verify', { timeout: 120_000 }, () => {
  let pool: VerifyPool;
  before(async () => {
    await initSignatureVerifier();
    pool = await VerifyPool.start({ threads: 2, maxBatch: 4 });
  });
  after(async () => {
    await pool.close();
  });

  it('has valid and tampered cases, and the gateway verifier judges each as expected', () => {
    assert.equal(new Set(CASES.map((c) => c.name)).size, 9);
    for (const { name, event, valid } of CASES) {
      assert.equal(verifySignature(fresh(event)), valid, name);
    }
  });

  it('gives the inline verdicts from worker threads, over batches of several messages', async () => {
    const verdicts = await Promise.all(CASES.map((c) => pool.verify(fresh(c.event))));
    assert.deepEqual(
      verdicts,
      CASES.map((c) => c.valid),
    );
    assert.equal(await pool.verify(fresh(CASES[0]!.event)), true, 'one at a time too');
  });

  it('times a candidate only when its verdicts are right, and says why not', async () => {
    const base = { version: '0', engine: 'test', install: 'test', eligible: true };
    const candidates: SchnorrCandidate[] = [
      {
        ...base,
        name: '@noble/curves',
        specifier: '@noble/curves/secp256k1.js',
        adapt: (m) => {
          const { schnorr } = m as {
            schnorr: { verify(s: Uint8Array, m: Uint8Array, p: Uint8Array): boolean };
          };
          return (message, pubkey, sig) => schnorr.verify(sig, message, pubkey);
        },
      },
      { ...base, name: 'nostr-tools', specifier: 'nostr-tools/pure', adapt: () => () => true },
      { ...base, name: 'not-a-package', specifier: 'not-a-package', adapt: () => () => true },
    ];
    const result = await runVerifyBench(
      {
        events: 4,
        rounds: 1,
        contentChars: 10,
        seed: 1,
        poolThreads: [1],
        poolEvents: 8,
        poolBatch: 4,
        latencyEvents: 2,
      },
      () => undefined,
      candidates,
    );
    const status = Object.fromEntries(result.candidates.map((c) => [c.name, c.status]));
    assert.equal(status['@noble/curves'], 'measured');
    assert.match(status['nostr-tools']!, /^not timed, wrong verdicts: .*another pubkey/);
    assert.equal(status['not-a-package'], 'not installed');
    // Candidates are labelled with the version installed.
    const timed = result.rows.map((r) => r.verifier);
    assert.ok(timed.some((v) => v.startsWith('@noble/curves ')));
    assert.ok(
      !timed.some((v) => v.startsWith('nostr-tools ')),
      'the candidate that accepts anything is not timed',
    );
    assert.equal(result.best?.name.startsWith('@noble/curves'), true);
    assert.equal(result.best?.winsByMoreThan2x, false);
    assert.deepEqual(
      result.pool.map((r) => r.arm),
      ['inline (the gateway today)', 'worker pool, 1 thread(s)'],
    );
    assert.ok(result.pool[1]!.perCpuSecond > 0);
  });
});
