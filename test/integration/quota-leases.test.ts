/**
 * Quota leases (quotas.lease) through real gateway processes on a real Valkey: never a write
 * over the limit however many gateways share it, the documented bound on what is lost to
 * leases, a lower multiplier clipping leases at once, and Valkey failing under held leases.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { underAdmissionBound } from '../../src/quota/limits.js';
import { CLIENT_KINDS } from '../../src/store/index.js';
import { startInstance, stopInstance } from '../../src/valkey/embedded.js';
import type { InstanceSelector } from '../../src/valkey/embedded.js';
import { venvDir } from '../../src/harness/paths.js';
import { MODES, unusedPort } from '../helpers/env.js';
import { admin, metricValue, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { httpWrites } from '../helpers/http-writes.js';
import { startRelay } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';
import { inBatches, waitFor } from '../helpers/raw-socket.js';

const { write, freshClient } = httpWrites(20);

/** What a client's counter holds in Valkey, read through a gateway's admin view. */
async function usage(gw: GatewayUnderTest, ip: string) {
  const res = await admin(gw, 'GET', `/admin/clients/ip:${ip}`);
  assert.equal(res.status, 200, res.body);
  return (
    JSON.parse(res.body) as {
      write: {
        limit: number;
        consumed: number;
        lease?: { leased: number; spent: number; held: number } | null;
      };
    }
  ).write;
}

function leaseSettings(
  prefix: string,
  points: number,
  windowSec: number,
  lease = {},
  gateways = 1,
) {
  return {
    // The address is the client: one key signs every event, and is no identity here.
    identity: { order: ['ip'] },
    quotas: {
      keyPrefix: prefix,
      gateways,
      tiers: { default: { write: { points, windowSec } } },
      lease: { enabled: true, ...lease },
    },
  };
}

let relay: SluiceProcess;
let upstreams: { id: string; url: string }[];
before(async () => {
  relay = await startRelay({ nodeId: 'relay-a' });
  upstreams = [{ id: 'relay-a', url: relay.url }];
});
after(async () => {
  await relay?.stop();
});

const run = Date.now().toString(36);

for (const mode of MODES) {
  describe(
    `leases: three gateways, one per client, sharing ${mode} Valkey`,
    { timeout: 120_000 },
    () => {
      const LIMIT = 40;
      const HOLDERS = CLIENT_KINDS.length;
      let gateways: GatewayUnderTest[] = [];

      before(async () => {
        gateways = await Promise.all(
          CLIENT_KINDS.map((client) =>
            startGateway(
              client,
              mode,
              upstreams,
              leaseSettings(`lease-${run}-${mode}`, LIMIT, 60, {}, HOLDERS),
            ),
          ),
        );
      });
      after(async () => {
        for (const gw of gateways) assert.equal(await gw.proc.stop(), 0, 'clean exit');
      });

      it('many identities hammered through every gateway: none admitted past its limit, none short of the bound', async () => {
        const clients = Array.from({ length: 12 }, () => freshClient());
        const perClient = LIMIT * 2;
        // Every write of every identity at once, spread over the gateways, 24 in flight.
        const jobs = clients.flatMap((ip) =>
          Array.from({ length: perClient }, (_, i) => ({ ip, gw: gateways[i % HOLDERS]! })),
        );
        const statuses = await inBatches(
          jobs,
          24,
          async ({ ip, gw }) => (await write(gw, ip)).status,
        );
        const bound = underAdmissionBound(LIMIT, HOLDERS);
        assert.ok(bound < LIMIT / 2, `the bound (${bound}) is a small part of the limit`);
        for (const ip of clients) {
          const mine = statuses.filter((_, j) => jobs[j]!.ip === ip);
          assert.ok(
            mine.every((s) => s === 200 || s === 429),
            `only admissions and refusals: ${JSON.stringify(mine)}`,
          );
          const admitted = mine.filter((s) => s === 200).length;
          assert.ok(admitted <= LIMIT, `${ip}: ${admitted} admitted over a limit of ${LIMIT}`);
          assert.ok(admitted >= LIMIT - bound, `${ip}: ${admitted} admitted, bound ${bound}`);
          // Valkey never counts past the limit: leases take only what fits.
          assert.ok((await usage(gateways[0]!, ip)).consumed <= LIMIT);
        }
        // Every admitted write spent a leased point, and leases saved round trips.
        let takes = 0;
        let spent = 0;
        for (const [i, gw] of gateways.entries()) {
          const labels = `client="${CLIENT_KINDS[i]}",result="ok"`;
          takes += await metricValue(gw, 'sluice_valkey_call_seconds_count', labels);
          spent += await metricValue(gw, 'sluice_lease_points_total', 'event="spent"');
        }
        const admittedAll = statuses.filter((s) => s === 200).length;
        assert.ok(takes < admittedAll, `${takes} takes for ${admittedAll} admitted writes`);
        assert.equal(spent, admittedAll, 'every admitted write spent one leased point');
      });
    },
  );
}

describe('leases: one client on one gateway', { timeout: 120_000 }, () => {
  let gw: GatewayUnderTest;
  const LIMIT = 30;
  before(async () => {
    gw = await startGateway(
      'iovalkey',
      'standalone',
      upstreams,
      leaseSettings(`lease1-${run}`, LIMIT, 2, { idleMs: 300 }),
    );
  });
  after(async () => {
    assert.equal(await gw.proc.stop(), 0, 'clean exit');
  });

  it('loses at most one point per window when it writes as fast as it can', async () => {
    const ip = freshClient();
    for (let window = 0; window < 3; window++) {
      // The first admission opens the window (after the last one's refusals).
      await waitFor('a new window', async () => (await write(gw, ip)).status === 200, 10_000);
      let admitted = 1;
      for (;;) {
        const res = await write(gw, ip);
        if (res.status === 429) break;
        assert.equal(res.status, 200);
        admitted++;
        assert.ok(admitted <= LIMIT, `window ${window}: more than ${LIMIT} admitted`);
        // One gateway holds every lease of this client: what is left is exact.
        assert.match(String(res.headers.ratelimit), new RegExp(`^"writes";r=${LIMIT - admitted};`));
      }
      assert.ok(admitted >= LIMIT - 1, `window ${window}: ${admitted} of ${LIMIT} admitted`);
    }
  });
});

describe('leases: an idle client', { timeout: 60_000 }, () => {
  let gw: GatewayUnderTest;
  before(async () => {
    // A long window, so the hand-back is seen before the counter's window ends.
    gw = await startGateway(
      'iovalkey',
      'standalone',
      upstreams,
      leaseSettings(`lease-idle-${run}`, 100, 60, { idleMs: 300 }),
    );
  });
  after(async () => {
    assert.equal(await gw.proc.stop(), 0, 'clean exit');
  });

  it('an idle client hands its unspent points back to Valkey', async () => {
    const ip = freshClient();
    // Leases grow with the key's rate (see LeaseBook): on a busy machine writes come slower,
    // so write until a lease holds points, not a fixed number of times.
    let held = await usage(gw, ip);
    let written = 0;
    while (!(held.lease && held.lease.held > 0)) {
      assert.ok(written < 40, `no lease held after ${written} writes: ${JSON.stringify(held)}`);
      assert.equal((await write(gw, ip)).status, 200);
      written++;
      held = await usage(gw, ip);
    }
    assert.ok(held.consumed > written, 'Valkey counts the leased points');
    await waitFor(
      'the idle hand-back',
      async () => (await usage(gw, ip)).consumed === written,
      5_000,
    );
  });
});

describe('leases: a gateway that stops hands its points back', { timeout: 60_000 }, () => {
  it('the counter in Valkey drops to what was spent once the holder exits', async () => {
    const settings = leaseSettings(`lease-stop-${run}`, 100, 60, {}, 2);
    const [holder, reader] = await Promise.all([
      startGateway('ioredis', 'cluster', upstreams, settings),
      startGateway('valkey-glide', 'cluster', upstreams, settings),
    ]);
    try {
      const ip = freshClient();
      for (let i = 0; i < 5; i++) assert.equal((await write(holder, ip)).status, 200);
      const held = await usage(holder, ip);
      assert.ok(held.lease!.held > 0 && held.consumed > 5, JSON.stringify(held));
      assert.equal(await holder.proc.stop(), 0, 'clean exit');
      assert.equal((await usage(reader, ip)).consumed, 5, 'only the spent points stay counted');
    } finally {
      await Promise.all([holder.proc.stop(), reader.proc.stop()]);
    }
  });
});

describe('leases: a lower multiplier clips held leases at once', { timeout: 60_000 }, () => {
  let gw: GatewayUnderTest;
  before(async () => {
    gw = await startGateway(
      'valkey-glide',
      'cluster',
      upstreams,
      leaseSettings(`lease-m-${run}`, 100, 60),
    );
  });
  after(async () => {
    assert.equal(await gw.proc.stop(), 0, 'clean exit');
  });

  it('1.0 -> 0.3 with a lease held: the next writes are judged against 30', async () => {
    const ip = freshClient();
    for (let i = 0; i < 20; i++) assert.equal((await write(gw, ip)).status, 200);
    assert.ok((await usage(gw, ip)).lease!.held > 10, 'a large lease is held');
    const change = await admin(gw, 'POST', '/admin/flow-control', {
      nodes: { 'relay-a': { multiplier: 0.3 } },
    });
    assert.equal(change.status, 200, change.body);
    // The board changed before the admin call answered: the very next write is judged by 30.
    const first = await write(gw, ip);
    assert.equal(first.headers['ratelimit-policy'], '"writes";q=30;w=60');
    let admitted = first.status === 200 ? 21 : 20;
    for (let i = 0; i < 20; i++) if ((await write(gw, ip)).status === 200) admitted++;
    assert.equal(admitted, 30, 'exactly the lower limit, the leased points given back');
    assert.equal((await usage(gw, ip)).consumed, 30);
  });
});

describe('leases: Valkey stops and starts with leases held', { timeout: 120_000 }, () => {
  const quiet = { info: () => undefined, warn: () => undefined };
  let scratch: string;
  let env: NodeJS.ProcessEnv;
  let valkey: InstanceSelector;

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'sluice-lease-fail-'));
    env = { ...process.env, SLUICE_RUN_DIR: scratch, SLUICE_VENV: venvDir() };
    valkey = { topology: 'standalone', port: await unusedPort() };
  });
  after(async () => {
    if (valkey) await stopInstance(valkey, quiet, env);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('no 5xx, the insurance share while it is down, leases again once it is back', async () => {
    await startInstance(valkey, quiet, env);
    const gw = await startGateway(
      'ioredis',
      'standalone',
      upstreams,
      leaseSettings(`lease-f-${run}`, 10, 30),
      [`127.0.0.1:${valkey.port}`],
    );
    try {
      const holder = freshClient();
      for (let i = 0; i < 3; i++) assert.equal((await write(gw, holder)).status, 200);
      await stopInstance(valkey, quiet, env);

      const from = freshClient();
      const statuses: number[] = [];
      for (let i = 0; i < 15; i++) statuses.push((await write(gw, from)).status);
      assert.deepEqual(statuses, [...Array<number>(10).fill(200), ...Array<number>(5).fill(429)]);
      // A new client's first write may be admitted on credit as Valkey stops: its take then
      // fails, and its point counts in the insured share with the writes after it.
      const insured = await metricValue(
        gw,
        'sluice_decisions_total',
        'outcome="insured",class="write",node="relay-a"',
      );
      const lost = await metricValue(gw, 'sluice_lease_points_total', 'event="overcredited"');
      assert.ok(insured + lost >= 15, `${insured} insured, ${lost} credited and lost`);

      await startInstance(valkey, quiet, env);
      const leasedBefore = await metricValue(gw, 'sluice_lease_points_total', 'event="leased"');
      await waitFor(
        'leases taken from Valkey again',
        async () => {
          const res = await write(gw, freshClient());
          assert.ok(res.status < 500, `no 5xx while Valkey returns (got ${res.status})`);
          return (
            (await metricValue(gw, 'sluice_lease_points_total', 'event="leased"')) > leasedBefore
          );
        },
        15_000,
      );
    } finally {
      await gw.proc.stop();
    }
  });
});
