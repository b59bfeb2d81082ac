import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { PlateauProbe, bandMultiplier } from '../../../src/pressure/laws/plateau-probe.js';
import type { Band, PlateauProbeParams } from '../../../src/pressure/laws/plateau-probe.js';
import { propertyParams } from '../../helpers/property-params.js';

const BOUND = { timeout: 60_000 };

const PARAMS: PlateauProbeParams = {
  uLo: 0.7,
  uHi: 1.0,
  minWidthU: 0.05,
  uCeil: 1.1,
  firstStepM: 0.1,
  windowSec: 10,
  mMin: 0.05,
  enoughM: 0.95,
  blind: false,
  keepShare: 0.5,
  minGainM: 0.005,
  riseU: 0.004,
  backoffSec: 10,
  maxBackoffSec: 120,
};

/**
 * Drive a probe on 0.5 s ticks: memory from `u(t, m)` (m: the band's multiplier at the last
 * tick, as the law would admit), the relay's word from `keepingUp(t)`. Returns the last band
 * and multiplier.
 */
function drive(
  probe: PlateauProbe,
  seconds: number,
  u: (t: number, m: number) => number,
  keepingUp: (t: number) => boolean | undefined,
): { band: Band; m: number } {
  let band: Band = { lo: PARAMS.uLo, hi: PARAMS.uHi };
  let m = 1;
  for (let t = 0; t < seconds; t += 0.5) {
    const level = u(t, m);
    m = bandMultiplier(level, band, PARAMS.mMin);
    band = probe.update(t, 0.5, level, m, keepingUp(t));
  }
  return { band, m };
}

describe('plateau probe', BOUND, () => {
  it('climbs a plateau the relay keeps up under: the multiplier comes back', () => {
    // Memory flat at 0.97 of target whatever is written (a heap that grew once), the relay
    // holding no backlog: the level alone would pin m at 0.14.
    const probe = new PlateauProbe(PARAMS);
    assert.ok(bandMultiplier(0.97, { lo: 0.7, hi: 1 }, 0.05) < 0.15);
    const { band, m } = drive(
      probe,
      90,
      () => 0.97,
      () => true,
    );
    assert.ok(m >= 0.9, `m ${m}`);
    assert.ok(band.lo <= 0.97 && band.hi >= 1, JSON.stringify(band));
  });

  it('takes no step while the relay says it falls behind, and gives a step back when it does', () => {
    const behind = new PlateauProbe(PARAMS);
    assert.deepEqual(
      drive(
        behind,
        90,
        () => 0.97,
        () => false,
      ).band,
      { lo: 0.7, hi: 1 },
    );
    // Keeping up for 25 s (a step is taken at 20 s), then behind: the step is given back.
    const then = new PlateauProbe(PARAMS);
    const climbed = drive(
      then,
      25,
      () => 0.97,
      () => true,
    ).band;
    assert.ok(climbed.lo > 0.7, `a step was taken: ${JSON.stringify(climbed)}`);
    let band = climbed;
    for (let t = 25; t < 31; t += 0.5) band = then.update(t, 0.5, 0.97, 0.5, false);
    assert.deepEqual(band, { lo: 0.7, hi: 1 });
  });

  it('learns nothing where the relay says nothing, unless told to probe blind', () => {
    const quiet = new PlateauProbe(PARAMS);
    assert.deepEqual(
      drive(
        quiet,
        120,
        () => 0.97,
        () => undefined,
      ).band,
      { lo: 0.7, hi: 1 },
    );
    const blind = new PlateauProbe({ ...PARAMS, blind: true });
    const { m } = drive(
      blind,
      120,
      () => 0.97,
      () => undefined,
    );
    assert.ok(m >= 0.9, `blind over a plateau: m ${m}`);
  });

  it('blind: a backlog held level answers its probes, which are given back less and less often', () => {
    // Memory follows writes: each 0.1 of m above 1/3 raises it at 0.005 of target a second.
    const probe = new PlateauProbe({ ...PARAMS, blind: true });
    let level = 0.9;
    let held = 0;
    const { m } = drive(
      probe,
      240,
      (_t, m) => {
        level = Math.max(0.6, level + 0.5 * 0.05 * (m - 1 / 3));
        held = Math.max(held, level);
        return level;
      },
      () => undefined,
    );
    assert.ok(held < 1.0, `memory peaked at ${held}`);
    assert.ok(Math.abs(m - 1 / 3) < 0.1, `m ${m}`);
  });

  it('keeps its band within bounds over any history (generated)', () => {
    // Memory as a walk with falls (a collection, a drained backlog), the relay mostly saying
    // it keeps up: probes are taken, kept and given back along the way.
    const tick = fc.record({
      dt: fc.double({ min: 0.05, max: 2, noNaN: true }),
      du: fc.oneof(
        { arbitrary: fc.double({ min: -0.01, max: 0.01, noNaN: true }), weight: 9 },
        { arbitrary: fc.double({ min: -0.4, max: 0.2, noNaN: true }), weight: 1 },
      ),
      m: fc.double({ min: 0, max: 1, noNaN: true }),
      keepingUp: fc.oneof(
        { arbitrary: fc.constant(true), weight: 20 },
        { arbitrary: fc.constantFrom(false, undefined), weight: 1 },
      ),
    });
    fc.assert(
      fc.property(
        fc.array(tick, { minLength: 50, maxLength: 600, size: 'max' }),
        fc.boolean(),
        fc.constantFrom(0, 0.1, 0.3),
        (ticks, blind, step) => {
          const probe = new PlateauProbe({ ...PARAMS, blind, firstStepM: step });
          let t = 0;
          let u = 0.9;
          let told = false;
          for (const k of ticks) {
            t += k.dt;
            u = Math.min(1.5, Math.max(0, u + k.du));
            told ||= k.keepingUp !== undefined;
            const band = probe.update(t, k.dt, u, k.m, k.keepingUp);
            // Never below the configured band, never above memory itself, never past the ceiling,
            // never narrower than its minimum.
            assert.ok(band.lo >= PARAMS.uLo - 1e-12, `lo ${band.lo}`);
            assert.ok(band.lo <= Math.max(PARAMS.uLo, u) + 1e-12, `lo ${band.lo} over u ${u}`);
            assert.ok(band.hi >= PARAMS.uHi && band.hi <= PARAMS.uCeil + 1e-12, `hi ${band.hi}`);
            assert.ok(band.hi - band.lo >= PARAMS.minWidthU - 1e-12, JSON.stringify(band));
            // No word from the relay and no blind probing, or no step: nothing is learned.
            if ((!told && !blind) || step === 0) {
              assert.deepEqual(band, { lo: PARAMS.uLo, hi: PARAMS.uHi });
            }
          }
        },
      ),
      propertyParams(300),
    );
  });
});
