/**
 * `sluice bench step` without processes: the rate that counts as recovered per disturbance,
 * the rate before the onset, figures computed again from a recorded arm, and the table, which
 * writes "never (why)" where a loop did not settle and never a number in its place.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  STEP_DEFAULTS,
  formatStepTable,
  rateBefore,
  recoverRate,
  refigure,
} from '../../../src/bench/step/step-bench.js';
import type { StepArmResult } from '../../../src/bench/step/step-bench.js';

/** An arm recorded every 0.25 s for 50 s: u rises to 0.9 after 10 s, or saw-tooths. */
function arm(settles: boolean): StepArmResult {
  const t: number[] = [];
  const u: number[] = [];
  const m: number[] = [];
  const accepted: number[] = [];
  for (let k = 0; k <= 200; k++) {
    const x = k * 0.25;
    t.push(x);
    u.push(
      x <= 10 ? 0.6 : settles ? 0.9 - 0.3 * Math.exp(-(x - 10) / 3) : 0.7 + 0.3 * ((x % 4) / 4),
    );
    m.push(x <= 10 ? 1 : 0.35);
    accepted.push(60 * x);
  }
  const window = { onset: 10, end: 50, recoverFrom: 10, recoverRatePerSec: 0 };
  return {
    law: 'lead',
    disturbance: 'step',
    idleBytes: 60e6,
    targetBytes: 120e6,
    levelBytes: 12e6,
    eventBytes: 33_000,
    sustainablePerSec: 63.5,
    sustainableAfterPerSec: 63.5,
    offeredBeforePerSec: 31.8,
    offeredAfterPerSec: 190.6,
    acceptedBeforePerSec: null,
    quotaPerSec: 191,
    spikeBytes: null,
    window,
    marks: [{ t: 10, text: 'flood 3 x sustainable' }],
    // Computed by refigure below.
    figures: null as unknown as StepArmResult['figures'],
    uBefore: 0.6,
    mBefore: 1,
    emergencyEntries: 0,
    answers: { ok2xx: 3000, limited429: 4000, other: {}, errors: 0, notSent: 0, examples: [] },
    missedSamples: 0,
    loadAverage: { start: 1, end: 1 },
    series: {
      t,
      u,
      m,
      m2: m,
      accepted,
      backlogBytes: t.map(() => 0),
      emergency: t.map(() => false),
    },
  };
}

describe('bench step', () => {
  it('recovered means 90% of the sustainable rate, of the offer if less, after a spike of what went in before', () => {
    assert.equal(recoverRate('step', 190, 63.5, 30), 0.9 * 63.5);
    assert.equal(recoverRate('degrade', 57, 15.9, 55), 0.9 * 15.9);
    // A spike changes neither the drain nor the offer: what the machine carried before it.
    assert.equal(recoverRate('spike', 57, 63.5, 52), 0.9 * 52);
    assert.equal(recoverRate('spike', 57, 63.5, null), 0.9 * 57);
  });

  it('the rate before the onset, over its last 5 s, or none from too few samples', () => {
    const series = { t: [4, 5, 6, 7, 8, 9, 9.75], accepted: [0, 50, 100, 150, 200, 250, 287.5] };
    assert.equal(rateBefore(series, 10), 50);
    assert.equal(rateBefore({ t: [9, 9.5], accepted: [0, 10] }, 10), null);
  });

  it('refigures from the recorded series and writes what did not settle as never', () => {
    const settled = refigure(arm(true));
    assert.equal(settled.window.recoverRatePerSec, 0.9 * 63.5);
    assert.ok(settled.figures.settleSec.value! > 0 && settled.figures.settleSec.value! < 10);
    const ringing = refigure(arm(false));
    assert.equal(ringing.figures.settleSec.value, null);
    const table = formatStepTable([settled, ringing], {
      ...STEP_DEFAULTS,
      valkeyClient: 'ioredis',
      laws: ['lead'],
    });
    const rows = table.split('\n').slice(2);
    assert.equal(rows.length, 2);
    assert.match(
      rows[0]!,
      /\| lead \| step: flood 3 x sustainable \| 0\.60 \| 0\.900 \(40\.0\) \| 5\.5 \| 0\.900 \(0\.35\) \| -0\.100 \| 0\.0 \|/,
    );
    assert.match(rows[1]!, /\| never \(u did not stay within ±0\.05 of /);
    assert.match(rows[1]!, /\| n\/a \(not settled\) \|/);
  });
});
