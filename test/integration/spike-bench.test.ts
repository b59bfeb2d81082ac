import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runSpikeBench } from '../../src/bench/spike-bench.js';
import type { SpikeBenchOptions } from '../../src/bench/spike-bench.js';
import { sluice } from '../helpers/cli.js';
import { nodesFor } from '../helpers/env.js';
// The benchmark's children are stopped even if the runner times this file out.
import '../helpers/signals.js';

const MiB = 1024 * 1024;

describe('sluice bench spike', { timeout: 180_000 }, () => {
  it("measures how fast both gateways lower a spiking relay's quota, and its peak", async () => {
    const opts: SpikeBenchOptions = {
      variants: ['spike'],
      paces: ['fast'],
      trials: 1,
      drainBytesPerSec: 2 * MiB,
      headroomBytes: 64 * MiB,
      level: 0.75,
      spikeShare: 0.6,
      eventContentBytes: 32 * 1024,
      steadyShare: 0.9,
      burstContentBytes: 120 * 1024,
      burstSec: 1,
      watchSec: 3,
      tickMs: 500,
      fastTickMs: 50,
      feedSource: 'pid',
      valkeyClient: 'ioredis',
      valkey: nodesFor('standalone')[0]!,
    };
    const [arm] = await runSpikeBench(opts, () => undefined);
    const trial = arm!.trials[0]!;
    assert.ok(trial.riseMs !== null, 'the relay took the spike');
    assert.ok(trial.reactionMs !== null, 'both gateways lowered the multiplier');
    assert.ok(trial.reactionMs > 0 && trial.reactionMs < 3000, `reaction ${trial.reactionMs}`);
    assert.ok(
      trial.mAfter < Math.min(...trial.mBefore),
      `m ${trial.mBefore.join('/')} -> ${trial.mAfter}`,
    );
    assert.ok(trial.peakOverTarget <= 1.1, `peak ${trial.peakOverTarget} x target`);
    assert.ok(arm!.feedSamplesPerSec > 2, 'the fast tick ran');
    assert.equal(arm!.writes.other + arm!.writes.errors, 0, 'clients saw only 2xx and 429');
    // The series the report draws: the whole arm, the trial marked.
    assert.ok(arm!.series.t.length > 10, `${arm!.series.t.length} samples`);
    assert.equal(arm!.series.u.length, arm!.series.t.length);
    assert.equal(arm!.marks.length, 1);
  });

  it('refuses an unknown variant, naming the choices', () => {
    const res = sluice(['bench', 'spike', '--variants', 'spike,boom'], process.env);
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, /--variants: boom; choose from spike, burst/);
  });
});
