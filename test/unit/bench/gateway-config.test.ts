/**
 * The gateway configuration of a benchmark run: --max-tracked-clients reaches the gateway's
 * limits.maxTrackedClients (and the configuration still parses); without it the gateway's own
 * default holds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RunConfig } from '../../../src/bench/run/config.js';
import { benchGatewayConfig } from '../../../src/bench/run/gateway-config.js';
import { DEFAULT_MAX_TRACKED_CLIENTS, GatewayConfigSchema } from '../../../src/config/schema.js';

function runConfig(extra: Partial<RunConfig> = {}): RunConfig {
  return {
    implementation: 'iovalkey+lease',
    client: 'iovalkey',
    mode: 'standalone',
    workload: 'nostr',
    transport: 'websocket',
    connections: 1,
    durationSec: 10,
    warmupSec: 3,
    run: 1,
    runs: 1,
    keys: 1000,
    distribution: 'uniform',
    zipfExponent: null,
    floodShare: null,
    quota: { points: 1_000_000, windowSec: 60 },
    inMemoryBlock: true,
    relayWorkIterations: 0,
    law: null,
    seed: 1,
    ...extra,
  };
}

const parsed = (cfg: RunConfig) =>
  GatewayConfigSchema.parse(
    benchGatewayConfig(cfg, { host: '127.0.0.1', port: 6379 }, 'http://127.0.0.1:1', 65_536),
  );

describe('bench gateway configuration', { timeout: 10_000 }, () => {
  it('--max-tracked-clients sets limits.maxTrackedClients', () => {
    assert.equal(
      parsed(runConfig({ maxTrackedClients: 1_000_000 })).limits.maxTrackedClients,
      1_000_000,
    );
  });

  it("without it, the gateway's default holds", () => {
    assert.equal(parsed(runConfig()).limits.maxTrackedClients, DEFAULT_MAX_TRACKED_CLIENTS);
  });
});
