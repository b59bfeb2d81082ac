#!/usr/bin/env node
/* global console, process */
// CPU of one quota decision on points already leased (docs/BENCHMARKS.md, "A decision from
// memory without a promise"): a decider with leases on a real Valkey, 1,000 identities,
// 500,000 awaited decisions a round, 5 rounds. Run after a build, with a Valkey of its own:
//   node scripts/decide-bench.mjs 127.0.0.1:6450
import { GatewayConfigSchema } from '../dist/src/config/schema.js';
import { MultiplierBoard } from '../dist/src/pressure/follower/board.js';
import { QuotaDecider } from '../dist/src/quota/decider.js';
import { Policy, makeIdentity } from '../dist/src/quota/policy.js';
import { createStore } from '../dist/src/store/index.js';

const [host, port] = (process.argv[2] ?? '127.0.0.1:6450').split(':');
const store = await createStore({
  client: 'iovalkey',
  mode: 'standalone',
  nodes: [{ host, port: Number(port) }],
});
const quotas = GatewayConfigSchema.parse({
  admin: { token: 'a-test-token-of-some-length' },
  upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:1' }],
  quotas: {
    keyPrefix: `decide-bench-${Date.now()}`,
    tiers: { default: { write: { points: 100_000_000, windowSec: 600 } } },
  },
}).quotas;
const decider = new QuotaDecider(
  store,
  new Policy(quotas),
  new MultiplierBoard(['relay-a']),
  quotas,
);
const ids = Array.from({ length: 1000 }, (_, i) =>
  makeIdentity('ip', `198.51.100.${i}`, 'default', 'salt'),
);
const request = (i) => ({
  identity: ids[i % ids.length],
  ip: '192.0.2.1',
  cls: 'write',
  cost: 1,
  nodeId: 'relay-a',
});
// Warm up: every identity holds a lease of its full size.
for (let i = 0; i < 200_000; i++) await decider.decide(request(i));
for (let round = 1; round <= 5; round++) {
  const n = 500_000;
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    if (!(await decider.decide(request(i))).admitted) throw new Error('refused');
  }
  const used = process.cpuUsage(cpu);
  console.log(`round ${round}: ${((used.user + used.system) / n).toFixed(2)} us of CPU a decision`);
}
await decider.close();
await store.close();
