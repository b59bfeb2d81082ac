import type fc from 'fast-check';

const seedFromEnv = Number(process.env.SLUICE_PROPERTY_SEED);

/**
 * fast-check's parameters for `numRuns` runs, with the seed of SLUICE_PROPERTY_SEED when it is
 * set: a failure prints its seed, and this replays it.
 */
export function propertyParams(numRuns: number): fc.Parameters<unknown> {
  return { numRuns, ...(Number.isFinite(seedFromEnv) ? { seed: seedFromEnv } : {}) };
}
