/**
 * `sluice bench pair` against real processes: a relay, two gateways (quotas off, and leases on
 * a real Valkey) under load at once, in each order of start; the figures it prints come from
 * both sides' answers and CPU.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { geometricMean, runPair } from '../../src/bench/pair.js';
import { allowedCpus, parseCpuList } from '../../src/harness/pinning.js';
import { standaloneNodes } from '../helpers/env.js';

/** A pair as small as measures anything: 2 connections each, 1 s of warm-up, 1 round of 1 s. */
const tiny = () => ({
  valkey: standaloneNodes()[0]!,
  connections: 2,
  keys: 20,
  warmupSec: 1,
  durationSec: 1,
  rounds: 1,
});

describe('bench pair', { timeout: 120_000 }, () => {
  it('measures both gateways at once, in each order, and gives b over a', async () => {
    const result = await runPair({ ...tiny(), a: 'quotas-off', b: 'iovalkey+lease' });
    assert.deepEqual(
      result.rounds.map((r) => r.first),
      ['a', 'b'],
      'one round with each in the first slot',
    );
    for (const round of result.rounds) {
      for (const side of [round.a, round.b]) {
        assert.ok(side.requestsPerSec > 0, 'both served writes');
        assert.equal(side.failed, 0, 'every write answered 2xx');
        assert.ok(side.cpuMsPerRequest > 0 && Number.isFinite(side.cpuMsPerRequest));
      }
      assert.equal(round.rateRatio, round.b.requestsPerSec / round.a.requestsPerSec);
    }
    assert.equal(result.rateRatio, geometricMean(result.rounds.map((r) => r.rateRatio)));
    assert.equal(result.cpuRatio, geometricMean(result.rounds.map((r) => r.cpuRatio)));
  });

  it('pinned, runs both gateways on their cores and the load on its own, then lets go', async () => {
    const own = allowedCpus(process.pid);
    const cpus = parseCpuList(own);
    const gatewayCpus = [cpus.at(-1)!];
    const loadCpus = [cpus[0]!];
    const result = await runPair({
      ...tiny(),
      a: 'quotas-off',
      b: 'quotas-off',
      orders: 1,
      gatewayCpus,
      loadCpus,
    });
    assert.equal(result.rounds.length, 1, 'one order of one round');
    const [round] = result.rounds;
    for (const side of [round!.a, round!.b]) {
      assert.equal(side.cpus, String(gatewayCpus[0]), 'each gateway ran on the named core only');
      assert.ok(side.requestsPerSec > 0 && side.failed === 0);
    }
    assert.deepEqual(result.gatewayCpus, gatewayCpus);
    assert.deepEqual(result.loadCpus, loadCpus);
    assert.equal(allowedCpus(process.pid), own, 'this process has its cores back');
  });

  it('refuses what it cannot compare before starting anything', async () => {
    const base = tiny();
    await assert.rejects(runPair({ ...base, a: 'quotas-off', b: 'ws-floor' }), /not an HTTP/);
    await assert.rejects(
      runPair({ ...base, a: 'quotas-off', b: 'fastify-rate-limit' }),
      /sluice gateways/,
    );
    await assert.rejects(
      runPair({ ...base, a: 'quotas-off', b: 'iovalkey+lease:cluster' }),
      /one Valkey topology/,
    );
  });

  it('a slot advantage that multiplies one order cancels in the geometric mean', () => {
    // Two identical gateways, the first slot 6% faster: 1.06 one way, 1/1.06 the other.
    assert.ok(Math.abs(geometricMean([1.06, 1 / 1.06]) - 1) < 1e-12);
    assert.ok(Math.abs(geometricMean([0.9 * 1.06, 0.9 / 1.06]) - 0.9) < 1e-12);
  });
});
