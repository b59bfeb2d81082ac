/**
 * The documented table (docs/BENCHMARKS.md, "Scale simulation"): three sizes, each steady
 * and with faults (a failover of the hot key's primary, then its slot's migration), leases
 * off and on.
 */
import { DEFAULT_SCALE } from './config.js';
import type { ScaleConfig } from './config.js';

export const SIZES: readonly Pick<
  ScaleConfig,
  'gateways' | 'primaries' | 'identities' | 'writesPerSec' | 'durationSec'
>[] = [
  { gateways: 3, primaries: 3, identities: 1000, writesPerSec: 10_000, durationSec: 3 },
  { gateways: 12, primaries: 6, identities: 1_000_000, writesPerSec: 100_000, durationSec: 3 },
  { gateways: 100, primaries: 30, identities: 10_000_000, writesPerSec: 1_000_000, durationSec: 2 },
];

/** Every row of the table, smallest first; `sizes` picks some of them (0, 1, 2). */
export function matrixConfigs(base: Partial<ScaleConfig>, sizes: readonly number[]): ScaleConfig[] {
  const out: ScaleConfig[] = [];
  for (const i of sizes) {
    for (const faults of [false, true]) {
      for (const leases of [false, true]) {
        out.push({
          ...DEFAULT_SCALE,
          ...base,
          ...SIZES[i]!,
          leases,
          failover: faults,
          migration: faults,
        });
      }
    }
  }
  return out;
}
