import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { CLIENT_KINDS } from '../../src/store/index.js';
import { startInstance, stopInstance } from '../../src/valkey/embedded.js';
import type { InstanceSelector } from '../../src/valkey/embedded.js';
import { venvDir } from '../../src/harness/paths.js';
import { unusedPort } from '../helpers/env.js';
import { request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

const quiet = { info: () => undefined, warn: () => undefined };

/** Sum of a counter's samples whose labels include `match`. */
async function counter(gw: GatewayUnderTest, name: string, match: string): Promise<number> {
  const text = (await request(`${gw.adminUrl}/metrics`)).body;
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) && line.includes(match))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

let address = 10;
function freshClient(): string {
  address++;
  return `127.0.9.${address}`;
}

const sk = generateSecretKey();
function write(gw: GatewayUnderTest, from: string, i: number) {
  const event = finalizeEvent(
    {
      kind: 1,
      created_at: Math.floor(Date.now() / 1000),
      tags: [],
      content: `${from} ${i} ${Math.random()}`,
    },
    sk,
  );
  return request(`${gw.url}/events`, { method: 'POST', body: JSON.stringify(event), from });
}

describe('Valkey failure during operation', { timeout: 120_000 }, () => {
  let scratch: string;
  let env: NodeJS.ProcessEnv;
  let valkey: InstanceSelector;
  let relay: SluiceProcess;

  before(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'sluice-gwfail-'));
    env = { ...process.env, SLUICE_RUN_DIR: scratch, SLUICE_VENV: venvDir() };
    valkey = { topology: 'standalone', port: await unusedPort() };
    await startInstance(valkey, quiet, env);
    relay = await startRelay({ nodeId: 'relay-a' });
  });

  after(async () => {
    try {
      await relay?.stop();
    } finally {
      // This Valkey runs detached: nothing else would stop it.
      if (valkey) await stopInstance(valkey, quiet, env);
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    }
  });

  for (const client of CLIENT_KINDS) {
    it(`${client}: the insurance limiter enforces while Valkey is down, never a 5xx; back within seconds`, async () => {
      await startInstance(valkey, quiet, env);
      const gw = await startGateway(
        client,
        'standalone',
        [{ id: 'relay-a', url: relay.url }],
        {
          quotas: {
            keyPrefix: `f-${client}`,
            tiers: { default: { write: { points: 10, windowSec: 10 } } },
          },
        },
        [`127.0.0.1:${valkey.port}`],
      );
      try {
        assert.equal((await write(gw, freshClient(), 0)).status, 200);
        await stopInstance(valkey, quiet, env);

        const from = freshClient();
        const statuses: number[] = [];
        for (let i = 0; i < 15; i++) statuses.push((await write(gw, from, i)).status);
        assert.deepEqual(statuses, [...Array<number>(10).fill(200), ...Array<number>(5).fill(429)]);
        assert.ok((await counter(gw, 'sluice_decisions_total', 'outcome="insured"')) >= 15);
        assert.ok((await counter(gw, 'sluice_valkey_call_seconds_count', 'result="error"')) >= 1);

        await startInstance(valkey, quiet, env);
        const allowedBefore = await counter(gw, 'sluice_decisions_total', 'outcome="allowed"');
        const deadline = Date.now() + 15_000;
        let back = false;
        while (!back && Date.now() < deadline) {
          const res = await write(gw, freshClient(), 99);
          assert.ok(res.status < 500, `no 5xx while Valkey returns (got ${res.status})`);
          back = (await counter(gw, 'sluice_decisions_total', 'outcome="allowed"')) > allowedBefore;
          if (!back) await sleep(200);
        }
        assert.ok(back, 'decisions come from Valkey again once it is back');
      } finally {
        await gw.proc.stop();
      }
    });
  }

  it('fail-closed: a store failure answers 503, never 429', async () => {
    await startInstance(valkey, quiet, env);
    const gw = await startGateway(
      'ioredis',
      'standalone',
      [{ id: 'relay-a', url: relay.url }],
      { quotas: { keyPrefix: 'f-closed', onStoreFailure: 'closed' } },
      [`127.0.0.1:${valkey.port}`],
    );
    try {
      await stopInstance(valkey, quiet, env);
      const res = await write(gw, freshClient(), 1);
      assert.equal(res.status, 503);
      assert.match(res.body, /quota-store-unavailable/);
      assert.equal((await request(`${gw.adminUrl}/readyz`)).status, 503);
    } finally {
      await gw.proc.stop();
    }
  });
});
