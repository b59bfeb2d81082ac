/**
 * Attack: a spam wave under memory pressure, many identities each far under its own quota
 * (a botnet, rotating keys and addresses), over raw sockets. The node's write budget refuses
 * what exceeds budget x m, whoever sends it (429, saying the relay is under memory pressure),
 * and never a 5xx; another client's reads are served all along, and the gateway stays up
 * with no internal error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addressSource, freshAuthor } from '../helpers/clients.js';
import { uniquePrefix } from '../helpers/env.js';
import { admin, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { rawRequest } from '../helpers/raw-http.js';
import type { RawResponse } from '../helpers/raw-http.js';
import { inBatches, metricSum, metricsOf } from '../helpers/raw-socket.js';

const FLOODERS = 200;
/** The node's budget: 20 writes per 60 s at m = 1, so 10 at m = 0.5. */
const BUDGET = 20;

function postEvent(body: string): string {
  return [
    'POST /events HTTP/1.1',
    'Host: gateway.test',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

const READ = [
  'GET /events?limit=1 HTTP/1.1',
  'Host: gateway.test',
  'Connection: close',
  '',
  '',
].join('\r\n');

describe('a spam wave of light identities under pressure', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const freshAddress = addressSource(21);

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway(
      'ioredis',
      'standalone',
      [{ id: 'relay-a', url: relay.url, writeBudget: { points: BUDGET, windowSec: 60 } }],
      { quotas: { keyPrefix: uniquePrefix('spam') } },
    );
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      nodes: { 'relay-a': { multiplier: 0.5 } },
    });
    assert.equal(res.status, 200, res.body);
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('refuses the wave past budget x m, while another client reads as before', async () => {
    const reader = freshAddress();
    const flood = Array.from({ length: FLOODERS }, () => ({
      from: freshAddress(),
      body: JSON.stringify(freshAuthor().event(0)),
    }));
    let flooding = true;
    const reads: number[] = [];
    const reading = (async () => {
      while (flooding) reads.push((await rawRequest(gw.url, READ, reader)).status);
    })();
    let answers: RawResponse[];
    try {
      answers = await inBatches(flood, 32, (f) => rawRequest(gw.url, postEvent(f.body), f.from));
    } finally {
      flooding = false;
      await reading;
    }

    const admitted = answers.filter((a) => a.status === 200).length;
    assert.ok(admitted >= 1 && admitted <= BUDGET * 0.5, `${admitted} admitted`);
    const refused = answers.filter((a) => a.status !== 200);
    assert.equal(refused.length, FLOODERS - admitted);
    for (const r of refused) {
      assert.equal(r.status, 429, r.body);
      assert.match(r.body, /relay under memory pressure/);
      assert.match(r.headers['ratelimit-policy'] ?? '', /"node-budget";q=10;w=60/);
    }
    assert.ok(reads.length >= 1, 'the reader got answers during the flood');
    assert.deepEqual(
      reads.filter((s) => s !== 200),
      [],
      "another client's reads are served",
    );

    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(metricSum(metrics, 'sluice_internal_errors_total'), 0);
    assert.equal(
      metricSum(metrics, 'sluice_node_budget_decisions_total', { outcome: 'limited' }),
      refused.length,
    );
    assert.equal(
      (await rawRequest(gw.adminUrl, READ.replace('/events?limit=1', '/readyz'))).status,
      200,
    );
  });
});
