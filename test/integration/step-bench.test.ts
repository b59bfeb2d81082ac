import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { STEP_DEFAULTS, runStepBench } from '../../src/bench/step/step-bench.js';
import type { StepBenchOptions } from '../../src/bench/step/step-bench.js';
import { sluice } from '../helpers/cli.js';
import { nodesFor } from '../helpers/env.js';
// The benchmark's children are stopped even if the runner times this file out.
import '../helpers/signals.js';

describe('sluice bench step', { timeout: 180_000 }, () => {
  it('records a flood on the lead law as series, marks and figures', async () => {
    const opts: StepBenchOptions = {
      ...STEP_DEFAULTS,
      laws: ['lead'],
      disturbances: ['step'],
      preSec: 4,
      watchSec: 15,
      valkeyClient: 'ioredis',
      valkey: nodesFor('standalone')[0]!,
    };
    const [arm] = await runStepBench(opts, () => undefined);
    const s = arm!.series;
    assert.ok(s.t.length > 20, `${s.t.length} samples`);
    for (const k of ['u', 'm', 'm2', 'accepted', 'backlogBytes', 'emergency'] as const) {
      assert.equal(s[k].length, s.t.length, k);
    }
    assert.deepEqual(
      arm!.marks.map((m) => m.text),
      ['flood 3 x sustainable'],
    );
    assert.ok(arm!.levelBytes > 0, 'the relay held its level');
    assert.ok(s.accepted.at(-1)! > 0, 'writes were accepted');
    // A peak is measured whatever the machine; the others are a number or a reason.
    assert.ok(arm!.figures.peakOverTarget! > 0.5, `peak ${arm!.figures.peakOverTarget}`);
    for (const f of [arm!.figures.settleSec, arm!.figures.recover90Sec]) {
      assert.ok((f.value === null) !== (f.why === null), JSON.stringify(f));
    }
  });

  it('refuses a watch too short for a steady window, and an unknown disturbance', () => {
    const short = sluice(['bench', 'step', '--watch-sec', '10'], process.env);
    assert.notEqual(short.status, 0);
    assert.match(short.stderr, /--watch-sec must be at least 15/);
    const odd = sluice(['bench', 'step', '--disturbances', 'step,boom'], process.env);
    assert.notEqual(odd.status, 0);
    assert.match(odd.stderr, /--disturbances: boom; choose from step, spike, degrade/);
  });
});
