import type { toConfig } from '../../src/cli/relay.js';

/** What commander hands `sluice relay`'s toConfig with every default, and `overrides`. */
export function relayFlags(
  overrides: Partial<Parameters<typeof toConfig>[0]> = {},
): Parameters<typeof toConfig>[0] {
  return {
    host: '127.0.0.1',
    port: 0,
    nodeId: 'n1',
    drainBytesPerSec: 1,
    workIterations: 0,
    maxEventBytes: 4096,
    ...overrides,
  };
}
