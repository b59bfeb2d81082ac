/**
 * sluice bench adaptive-work, short: with nostr.pow.adaptive on, the spam wave is accepted at
 * a fraction of its rate once the multiplier asks 12 bits, while the member is served
 * throughout; with it off, the multiplier alone does not slow the wave.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAdaptiveWorkBench } from '../../src/bench/adaptive-work/adaptive-work-bench.js';
import { nodesFor } from '../helpers/env.js';
import '../helpers/signals.js';

describe('sluice bench adaptive-work', { timeout: 180_000 }, () => {
  it('slows the wave as the multiplier falls only with adaptive work, never the member', async () => {
    const steps = await runAdaptiveWorkBench(
      {
        multipliers: [1, 0.125],
        secondsPerStep: 3,
        spamConnections: 4,
        memberPerSec: 2,
        bitsPerHalving: 4,
        maxDifficulty: 28,
        valkey: nodesFor('standalone')[0]!,
      },
      () => undefined,
    );
    const at = (adaptive: boolean, m: number) =>
      steps.find((s) => s.adaptive === adaptive && s.m === m)!;
    const why = JSON.stringify(steps);
    assert.equal(at(true, 0.125).difficulty, 12, why);
    assert.equal(at(false, 0.125).difficulty, 0, why);
    for (const s of steps) {
      assert.ok(s.member.sent >= 5 && s.member.accepted === s.member.sent, why);
      assert.equal(s.spam.accepted, s.spam.sent, `every event with its work passes: ${why}`);
    }
    assert.ok(at(true, 1).spam.accepted > 20, why);
    assert.ok(at(true, 0.125).spam.perSec < at(true, 1).spam.perSec / 2, why);
    // The control: the multiplier alone leaves the wave as fast as it signs (within the
    // machine's swings).
    assert.ok(at(false, 0.125).spam.perSec > at(false, 1).spam.perSec / 4, why);
  });
});
