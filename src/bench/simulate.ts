import type { ControlLaw } from '../pressure/laws/law.js';
import { LAWS, LAW_NAMES } from '../pressure/laws/registry.js';
import { ARM_LABELS } from './run/config.js';
import { DEFAULT_PLANT_PARAMS, createPlant, overloadStep, simulate } from './plant.js';
import type { SimSummary } from './plant.js';

/** A law that never adapts: the "no adaptation" variant on the simulated plant. */
const noAdaptation: ControlLaw = {
  name: 'none',
  step: (input) => ({ m: 1, u: input.u, uhat: input.u, mode: 'normal', emergencyEntries: 0 }),
};

/** Each variant on the simulated relay: a 3x step for 180 s after 30 s of half load. */
export function simulateVariants(factor = 3): { variant: string; summary: SimSummary }[] {
  const scenario = overloadStep({
    sustainableBytesPerSec: DEFAULT_PLANT_PARAMS.drainBytesPerSec,
    factor,
    quietFactor: 0.5,
    startSec: 30,
    overloadSec: 180,
  });
  const laws: [string, ControlLaw][] = [
    [ARM_LABELS.none, noAdaptation],
    ...LAW_NAMES.map((law): [string, ControlLaw] => [ARM_LABELS[law], LAWS[law].make({})]),
  ];
  return laws.map(([variant, law]) => ({
    variant,
    summary: simulate(law, createPlant(), scenario, { tickSec: 0.5, durationSec: 270 }).summary,
  }));
}

export function formatSimulation(rows: { variant: string; summary: SimSummary }[]): string {
  return [
    '| variant | peak u / band top | time above target s | emergency in / out | accepted / sustainable | m p2p | u p2p | settle s |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      ({ variant, summary: s }) =>
        `| ${variant} | ${s.peakOverBandTop.toFixed(3)} | ${s.timeAboveTargetSec.toFixed(1)} | ${s.emergencyEntries} / ${s.emergencyExits} | ${s.acceptedRatio.toFixed(3)} | ${s.mPeakToPeak.toFixed(2)} | ${s.uPeakToPeak.toFixed(3)} | ${s.settleSec === null ? 'never' : s.settleSec.toFixed(1)} |`,
    ),
  ].join('\n');
}
