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
    const sim = await simulateScale(cfg);
    const pairs = compareRuns(sim, real);
    runs.push({ leases, sim, real, pairs });
    tables.push(formatComparison(`leases ${leases ? 'on' : 'off'}`, pairs));
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
