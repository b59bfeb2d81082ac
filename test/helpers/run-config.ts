import type { RunConfig } from '../../src/bench/run/config.js';

/** A short Nostr run against the reference relay, the relay alone unless `over` says otherwise. */
export function nostrRunConfig(over: Partial<RunConfig>): RunConfig {
  return {
    implementation: 'relay-alone',
    client: null,
    mode: 'standalone',
    workload: 'nostr',
    transport: 'websocket',
    connections: 4,
    durationSec: 2,
    warmupSec: 0,
    run: 1,
    runs: 1,
    keys: 100,
    distribution: 'uniform',
    zipfExponent: null,
    floodShare: null,
    quota: { points: 1_000_000, windowSec: 1 },
    inMemoryBlock: true,
    relayWorkIterations: 0,
    law: null,
    seed: 7,
    relayImpl: 'reference',
    freshEvents: { maxPerSec: 3000, authors: 50 },
    ...over,
  };
}
