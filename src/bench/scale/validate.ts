/**
 * sluice bench scale --simulate --validate: one small configuration simulated and run for
 * real, leases off and on, one window long at most; the figures side by side.
 */
import { showResult } from '../results.js';
import type { ClientKind, NodeAddress } from '../../store/index.js';
import { compareRuns, formatComparison } from './compare.js';
import type { ScaleConfig } from './config.js';
import { runReal } from './real-run.js';
import { simulateScale } from './simulation.js';

/** A probe's round trips summed up (the samples themselves stay out of the results file). */
export function probeFigures(roundTripsMs: readonly number[]): {
  count: number;
  p50: number;
  p99: number;
  max: number;
} {
  const sorted = [...roundTripsMs].sort((a, b) => a - b);
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}

export async function validateScale(
  base: ScaleConfig,
  seed: NodeAddress,
  client: ClientKind,
  outDir: string | undefined,
  autoPipelining = true,
): Promise<void> {
  if (base.durationSec * 1000 >= base.windowSec * 1000) {
    throw new RangeError(
      'a validation run must be shorter than one window (--window-sec above --duration-sec)',
    );
  }
  const runs = [];
  const tables = [];
  for (const leases of [false, true]) {
    const cfg = { ...base, leases, hop: 'loopback' as const, judgeOpenWindows: true };
    const real = await runReal(cfg, seed, client, autoPipelining);
    // The model's round trips are those a probe met beside the real run (real-run.ts).
    const sim = await simulateScale({ ...cfg, measuredRoundTripsMs: real.probe.roundTripsMs });
    const pairs = compareRuns(sim, real);
    const probe = probeFigures(real.probe.roundTripsMs);
    runs.push({
      leases,
      sim,
      real: {
        ...real,
        probe: { ...probe, failed: real.probe.failed, metFault: real.probe.metFault },
      },
      pairs,
    });
    const label =
      `leases ${leases ? 'on' : 'off'} (the model's round trips: ${probe.count} probed beside ` +
      `the real run, p50 ${probe.p50.toFixed(2)} / p99 ${probe.p99.toFixed(2)} ms, ` +
      `${real.probe.failed} failed, ${real.probe.metFault} met the fault and left out)`;
    tables.push(formatComparison(label, pairs));
  }
  const command = `sluice bench scale ${process.argv.slice(4).join(' ')}`.trim();
  showResult(
    outDir,
    'scale-validate',
    { command, runs },
    tables.join('\n\n'),
    'scale-validate.json',
  );
}
