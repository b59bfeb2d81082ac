import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { nodesFor } from './env.js';
import { startGateway as startGatewayProcess } from '../../src/harness/processes.js';
import { after, before } from 'node:test';
import { startRelay, stoppedAfterFile } from './processes.js';
import type { RelayProcess, SluiceProcess } from './processes.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface GatewayUnderTest {
  proc: SluiceProcess;
  url: string;
  adminUrl: string;
  configFile: string;
}

/** Start `sluice gateway` as its own process with a config file built from `settings`. */
export async function startGateway(
  client: ClientKind,
  mode: Topology,
  upstreams: { id: string; url: string; writeBudget?: { points: number; windowSec?: number } }[],
  settings: Record<string, unknown> = {},
  valkeyNodes?: string[],
): Promise<GatewayUnderTest> {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-gw-'));
  const config = {
    listen: { port: 0 },
    admin: { port: 0, token: ADMIN_TOKEN },
    valkey: {
      client,
      mode,
      nodes: valkeyNodes ?? nodesFor(mode).map((n) => `${n.host}:${n.port}`),
      commandTimeoutMs: 500,
      connectTimeoutMs: 3000,
    },
    upstreams,
    healthCheck: { intervalMs: 500 },
    logging: { level: 'warn' },
    // One process unless a test asks for workers: 'auto' would fork one per core.
    workers: 1,
    ...settings,
  };
  const gw = await startGatewayProcess(config, path.join(dir, 'gateway.json'));
  return { ...gw, proc: stoppedAfterFile(gw.proc) };
}

/**
 * A reference relay (node id relay-a) and a gateway process in front of it (iovalkey on
 * standalone, `settings` over startGateway's; the relay takes `relayArgs`, its upstream
 * entry `upstream`, e.g. a writeBudget), for the enclosing suite: started before its
 * first test, stopped after its last.
 */
export function suiteRelayAndGateway(
  settings: Record<string, unknown>,
  relayArgs: string[] = [],
  upstream: Record<string, unknown> = {},
): {
  relay(): RelayProcess;
  gw(): GatewayUnderTest;
} {
  let relay: RelayProcess | undefined;
  let gw: GatewayUnderTest | undefined;
  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a', extraArgs: relayArgs });
    gw = await startGateway(
      'iovalkey',
      'standalone',
      [{ id: 'relay-a', url: relay.url, ...upstream }],
      settings,
    );
  });
  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });
  const started = <T>(what: T | undefined): T => {
    if (!what) throw new Error('the relay and gateway are not started yet');
    return what;
  };
  return { relay: () => started(relay), gw: () => started(gw) };
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** How long request() waits for an answer that does not come (a failure, not a hang). */
const REQUEST_TIMEOUT_MS = 30_000;

/**
 * One HTTP request from a chosen loopback source address: 127.0.0.2, 127.0.0.3 ... are
 * distinct clients to the gateway, with no header trickery. Rejects if the socket stays
 * silent for `timeoutMs`.
 */
export function request(
  url: string,
  opts: {
    method?: string;
    body?: string;
    headers?: Record<string, string>;
    from?: string;
    timeoutMs?: number;
  } = {},
): Promise<HttpResult> {
  const timeoutMs = opts.timeoutMs ?? REQUEST_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: opts.method ?? 'GET',
        headers: { 'content-type': 'application/json', ...opts.headers },
        localAddress: opts.from ?? '127.0.0.1',
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.setTimeout(timeoutMs, () =>
      req.destroy(new Error(`${opts.method ?? 'GET'} ${url}: no answer within ${timeoutMs} ms`)),
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export async function admin(
  gw: GatewayUnderTest,
  method: 'GET' | 'POST',
  route: string,
  body?: unknown,
  token = ADMIN_TOKEN,
): Promise<HttpResult> {
  return request(gw.adminUrl + route, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
}

/**
 * Write points a client ("ip:<address>", "pk:<hex>") has paid, from the admin view of a
 * one-process gateway: what Valkey counts, less the points leased to this gateway and not
 * yet spent (leases are on by default; off, it holds none).
 */
export async function writesConsumed(gw: GatewayUnderTest, client: string): Promise<number> {
  const res = await admin(gw, 'GET', `/admin/clients/${client}`);
  if (res.status !== 200) throw new Error(`/admin/clients/${client} answered ${res.status}`);
  const { write } = JSON.parse(res.body) as {
    write: { consumed: number; lease?: { held: number } | null };
  };
  return write.consumed - (write.lease?.held ?? 0);
}

/**
 * What `client` paid once it reaches `expected` (settlements after a relay's answer are
 * asynchronous), or what it paid when the deadline passed.
 */
export async function writesConsumedReach(
  gw: GatewayUnderTest,
  client: string,
  expected: number,
  timeoutMs = 10_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const paid = await writesConsumed(gw, client);
    if (paid === expected || Date.now() > deadline) return paid;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A metric's value on the admin listener: the series `name{labels}` exactly; 0 when absent. */
export async function metricValue(
  gw: GatewayUnderTest,
  name: string,
  labels: string,
): Promise<number> {
  const res = await admin(gw, 'GET', '/metrics');
  const line = res.body.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** A Nostr client on one WebSocket that collects every message it receives. */
export class NostrClient {
  readonly received: unknown[][] = [];
  private waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      this.received.push(JSON.parse(data.toString('utf8')) as unknown[]);
      for (const w of this.waiters.splice(0)) w();
    });
  }

  static async connect(url: string, from = '127.0.0.1'): Promise<NostrClient> {
    // A handshake that is never answered fails the test instead of hanging it.
    const ws = new WebSocket(url.replace(/^http/, 'ws'), {
      localAddress: from,
      handshakeTimeout: 10_000,
    });
    // Collecting from the start: a relay may speak first (a NIP-42 challenge on connect),
    // in the same read as the handshake's answer.
    const client = new NostrClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return client;
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Wait until `predicate` holds over everything received so far. */
  async until(predicate: (msgs: unknown[][]) => boolean, timeoutMs = 10_000): Promise<unknown[][]> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.received)) {
      if (Date.now() > deadline) {
        throw new Error(
          `timed out; received so far: ${JSON.stringify(this.received).slice(0, 2000)}`,
        );
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    return this.received;
  }

  oks(): unknown[][] {
    return this.received.filter((m) => m[0] === 'OK');
  }

  /** Send an EVENT (or AUTH) and wait for the first OK for `id` received after it. */
  async okFor(id: string, message: unknown, timeoutMs = 10_000): Promise<unknown[]> {
    const from = this.received.length;
    const answers = (m: unknown[]) => m[0] === 'OK' && m[1] === id;
    this.send(message);
    await this.until((msgs) => msgs.slice(from).some(answers), timeoutMs);
    return this.received.slice(from).find(answers)!;
  }

  close(): void {
    this.ws.close();
  }
}
