/**
 * A bounded raw-socket fuzz run against a real gateway and reference relay: thousands of
 * generated HTTP requests and WebSocket frames (see helpers/fuzz-cases.ts), capped in count
 * and time. Every exchange must be answered or closed within a deadline; afterwards the
 * gateway is alive, serves a normal client over HTTP and WebSocket, has counted no internal
 * error and stayed within a memory bound.
 *
 * The generator is seeded: a failure names its seed; replay with SLUICE_FUZZ_SEED=<seed>.
 * SLUICE_FUZZ_SECONDS and SLUICE_FUZZ_CASES change the caps.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { isAlive } from '../helpers/cli.js';
import { fuzzCase } from '../helpers/fuzz-cases.js';
import type { FuzzCase } from '../helpers/fuzz-cases.js';
import { runExchange } from '../helpers/fuzz-socket.js';
import type { ExchangeResult } from '../helpers/fuzz-socket.js';
import { NostrClient, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { metricSum, metricsOf, rssBytes } from '../helpers/raw-socket.js';

const envNumber = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
};

const SEED = envNumber('SLUICE_FUZZ_SEED', Date.now() % 2 ** 31);
const SECONDS = envNumber('SLUICE_FUZZ_SECONDS', 25);
const MAX_CASES = envNumber('SLUICE_FUZZ_CASES', 6000);
const CONCURRENCY = 48;
const BATCH = 100;
const RSS_HEADROOM = 100 * 1024 * 1024;

/** Short timeouts, so a client that stalls is closed well within an exchange's deadline. */
const LIMITS = {
  headersTimeoutMs: 1000,
  requestTimeoutMs: 2000,
  keepAliveTimeoutMs: 500,
  upstreamTimeoutMs: 3000,
  maxFrameBytes: 16 * 1024,
  maxBodyBytes: 64 * 1024,
};
/** Every exchange must have been closed by then (the longest timeout above, and slack). */
const DEADLINE_MS = 9000;

interface Failure {
  index: number;
  fuzz: FuzzCase;
  result: ExchangeResult;
}

/** Loopback source addresses, so per-address limits and quotas spread as over many clients. */
function sourceAddress(n: number): string {
  return `127.0.${40 + (Math.floor(n / 250) % 8)}.${1 + (n % 250)}`;
}

function signedNote(content: string) {
  return finalizeEvent(
    { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content },
    generateSecretKey(),
  );
}

/** An upgrade request to `target`, complete but for what the target does to the path. */
function upgradeTo(target: string): Buffer {
  return Buffer.from(
    `GET ${target} HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
}

/**
 * Inputs that earlier fuzz runs (or the issue) found harmful, replayed on every run whatever
 * the seed: each must be answered and leave the gateway and the relay up.
 */
const KNOWN_HARMFUL: { what: string; bytes: Buffer }[] = [
  {
    what: 'an upgrade with an absolute-form target (the gateway exited: issue 9, 1)',
    bytes: upgradeTo('http://x/'),
  },
  {
    what: 'an upgrade to "//a%2Fb" (forwarded as is, the reference relay exited: new URL threw)',
    bytes: upgradeTo('//a%2Fb'),
  },
  {
    what: 'an upgrade to "http://x//a%2Fb" (forwarded as "//a%2Fb": the same)',
    bytes: upgradeTo('http://x//a%2Fb'),
  },
];

describe('inputs fuzz runs found harmful', { timeout: 90_000 }, () => {
  // Each input gets its own relay and gateway: one that kills a process must not fail the next.
  for (const known of KNOWN_HARMFUL) {
    it(`answers ${known.what}, and both processes stay up`, async () => {
      const relay = await startRelay({ nodeId: 'relay-a' });
      const gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
        quotas: { keyPrefix: `fuzzknown${Date.now().toString(36)}` },
      }).catch(async (err: unknown) => {
        await relay.stop();
        throw err;
      });
      try {
        const result = await runExchange({
          port: gw.proc.port,
          localAddress: '127.0.39.1',
          chunks: [known.bytes],
          fin: 'after-answer',
          deadlineMs: DEADLINE_MS,
        });
        // Give a dying process the moment it needs to be gone.
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.ok(isAlive(gw.proc.pid), `the gateway exited:\n${gw.proc.output().slice(-2000)}`);
        assert.ok(isAlive(relay.pid), `the relay exited:\n${relay.output().slice(-2000)}`);
        assert.equal(result.ending, 'closed', JSON.stringify(result));
        assert.ok(result.statuses.length > 0, `answered: ${JSON.stringify(result)}`);
      } finally {
        await gw.proc.stop();
        await relay.stop();
      }
    });
  }
});

describe('raw-socket fuzz run', { timeout: 180_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      identity: { order: ['pubkey', 'ip'] },
      quotas: { keyPrefix: `fuzz${Date.now().toString(36)}` },
      limits: LIMITS,
      nostr: { maxInvalidEvents: 3 },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await gw?.proc.stop();
    await relay?.stop();
  });

  /** A write over HTTP and an EVENT over WebSocket get their normal answers. */
  async function assertServesNormalClient(label: string): Promise<void> {
    const note = signedNote(`normal client ${label}`);
    const res = await request(`${gw.url}/events`, {
      method: 'POST',
      body: JSON.stringify(note),
      from: '127.0.9.9',
    });
    assert.equal(res.status, 200, `${label}: POST /events answered ${res.status} ${res.body}`);
    assert.equal((JSON.parse(res.body) as { accepted: boolean }).accepted, true, res.body);

    const ws = await NostrClient.connect(gw.url, '127.0.9.10');
    clients.push(ws);
    const event = signedNote(`normal client ws ${label}`);
    ws.send(['EVENT', event]);
    await ws.until((m) => m.some((x) => x[0] === 'OK' && x[1] === event.id));
    const ok = ws.received.find((m) => m[0] === 'OK' && m[1] === event.id)!;
    assert.deepEqual(ok.slice(0, 3), ['OK', event.id, true], `${label}: ${JSON.stringify(ok)}`);
    ws.close();
  }

  it('answers or closes every exchange, stays up, counts no internal error, bounds memory', async (t) => {
    t.diagnostic(`fuzz seed ${SEED} (replay: SLUICE_FUZZ_SEED=${SEED})`);
    await assertServesNormalClient('before the fuzz');
    const baseline = rssBytes(gw.proc.pid);
    let peak = baseline;
    const sampler = setInterval(() => {
      if (isAlive(gw.proc.pid)) peak = Math.max(peak, rssBytes(gw.proc.pid));
    }, 250);

    const stopAt = Date.now() + SECONDS * 1000;
    const failures: Failure[] = [];
    const statuses = new Map<number, number>();
    const closeCodes = new Map<number, number>();
    let batch: FuzzCase[] = [];
    let next = 0;
    let ran = 0;
    let units = { http: 0, ws: 0 };
    const caseAt = (index: number): FuzzCase => {
      const within = index % BATCH;
      if (within === 0) {
        // Generated a batch at a time, each batch from its own seed: memory stays small and
        // any case can be regenerated from (SEED, index).
        batch = fc.sample(fuzzCase, { seed: SEED + index / BATCH, numRuns: BATCH });
      }
      return batch[within]!;
    };
    const worker = async () => {
      while (next < MAX_CASES && Date.now() < stopAt) {
        const index = next++;
        const fuzz = caseAt(index);
        const result = await runExchange({
          port: gw.proc.port,
          localAddress: sourceAddress(index),
          chunks: fuzz.chunks,
          gapsMs: fuzz.gapsMs,
          fin: fuzz.fin,
          afterUpgrade: fuzz.session,
          deadlineMs: DEADLINE_MS,
        });
        ran++;
        units = { ...units, [fuzz.kind]: units[fuzz.kind] + fuzz.units };
        for (const s of result.statuses) statuses.set(s, (statuses.get(s) ?? 0) + 1);
        for (const c of result.closeCodes) closeCodes.set(c, (closeCodes.get(c) ?? 0) + 1);
        if (result.ending !== 'closed') failures.push({ index, fuzz, result });
        // A gateway that is gone refuses everything after: stop early, report what killed it.
        if (result.ending === 'refused' && !isAlive(gw.proc.pid)) break;
      }
    };
    // Each worker takes its index and its case in one synchronous step: batches come in order.
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    clearInterval(sampler);

    const histogram = (m: Map<number, number>) =>
      [...m.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([k, v]) => `${k}x${v}`)
        .join(' ');
    t.diagnostic(
      `ran ${ran} exchanges: ${units.http} HTTP requests, ${units.ws} WebSocket frames; ` +
        `statuses ${histogram(statuses)}; close codes ${histogram(closeCodes)}; relay taken ` +
        `out of rotation ${gw.proc.output().split('taken out of rotation').length - 1} times`,
    );
    const describeFailure = (f: Failure) =>
      `#${f.index} ${f.result.ending} after ${f.result.ms} ms (${f.result.received} bytes back, ` +
      `statuses ${f.result.statuses.join(',') || 'none'}): ${f.fuzz.label.slice(0, 400)}`;
    const alive = isAlive(gw.proc.pid);
    assert.ok(
      alive,
      `the gateway exited during the fuzz (seed ${SEED}); last failures:\n` +
        `${failures.slice(-5).map(describeFailure).join('\n')}\n` +
        `gateway output:\n${gw.proc.output().slice(-3000)}`,
    );
    assert.equal(
      failures.length,
      0,
      `${failures.length} of ${ran} exchanges were neither answered nor closed within ` +
        `${DEADLINE_MS} ms (seed ${SEED}):\n${failures.slice(0, 10).map(describeFailure).join('\n')}`,
    );
    assert.ok(
      isAlive(relay.pid),
      `the relay exited during the fuzz (seed ${SEED}): what the gateway forwarded killed it\n` +
        `relay output:\n${relay.output().slice(-3000)}`,
    );
    assert.ok(ran >= Math.min(MAX_CASES, 500), `only ${ran} exchanges ran (seed ${SEED})`);

    await assertServesNormalClient('after the fuzz');

    const metrics = await metricsOf(gw.adminUrl);
    assert.ok(
      metrics.includes('# TYPE sluice_internal_errors_total counter'),
      'the gateway exports no sluice_internal_errors_total: the fuzz cannot tell that nothing escaped',
    );
    const internalErrors = metricSum(metrics, 'sluice_internal_errors_total');
    assert.equal(
      internalErrors,
      0,
      `${internalErrors} internal errors during the fuzz (seed ${SEED}):\n` +
        metrics
          .split('\n')
          .filter((l) => l.startsWith('sluice_internal_errors_total'))
          .join('\n') +
        // The errors themselves, wherever they are in the output (the tail is mostly warnings).
        `\ngateway errors:\n${gw.proc
          .output()
          .split('\n')
          .filter((l) => l.includes('last-resort handler'))
          .slice(0, 5)
          .join('\n')
          .slice(0, 6000)}`,
    );

    const final = rssBytes(gw.proc.pid);
    const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
    t.diagnostic(`RSS: baseline ${mib(baseline)}, peak ${mib(peak)}, after ${mib(final)}`);
    assert.ok(
      peak <= baseline + RSS_HEADROOM && final <= baseline + RSS_HEADROOM,
      `RSS grew from ${mib(baseline)} to a peak of ${mib(peak)} (${mib(final)} after; seed ${SEED})`,
    );
  });
});
