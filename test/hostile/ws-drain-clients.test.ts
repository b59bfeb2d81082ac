/**
 * pressure.drain against clients that do not play along (issue 20's drain, issue 21's charges):
 * a client that never reads while it is moved must not hold the gateway (cut after a bounded
 * grace, its buffered bytes released), and a client that closes while its move waits for the
 * relay's OKs must still have its awaited EVENTs charged. Over raw sockets, against a gateway
 * before two stand-in relays (one to fall sick); another client is served throughout.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { uniquePrefix } from '../helpers/env.js';
import { NostrClient, admin, startGateway, writesConsumed } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { signedEvent } from '../helpers/nostr-events.js';
import { stopAll } from '../helpers/processes.js';
import { RawNostr } from '../helpers/raw-nostr.js';
import {
  clientTextFrame,
  connectionHeld,
  metricSum,
  metricsOf,
  rawUpgrade,
  waitFor,
} from '../helpers/raw-socket.js';

/** The drain under test: settle 4 s for pending OKs, at least one move a second. */
const DRAIN = { enabled: true, sharePerSec: 0.5, minPerSec: 1, settleMs: 4000 };
/** What a REQ streams back: 128 messages of 64 KiB (8 MiB, past every socket buffer). */
const STREAMED = { messages: 128, bytes: 64 * 1024 };
/** A moved client that does not take its close is cut within this (ws alone waits 30 s). */
const LET_GO_WITHIN_MS = 8000;

/**
 * A stand-in relay: answers any HTTP request 200 (health checks), streams STREAMED on a REQ,
 * and answers EVENTs OK true at once, or, while holding, once the test releases them.
 */
class StandInRelay {
  holding = false;
  readonly events: string[] = [];
  connections = 0;
  private held: { ws: WebSocket; id: string }[] = [];

  private constructor(readonly server: http.Server) {
    const wss = new WebSocketServer({ noServer: true });
    server.on('request', (_req, res) => res.end('ok'));
    server.on('upgrade', (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        this.connections++;
        ws.on('message', (data: Buffer) => this.message(ws, data));
      }),
    );
  }

  static async start(): Promise<StandInRelay> {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return new StandInRelay(server);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  release(): void {
    for (const { ws, id } of this.held.splice(0)) ws.send(JSON.stringify(['OK', id, true, '']));
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  private message(ws: WebSocket, data: Buffer): void {
    const [verb, arg] = JSON.parse(data.toString()) as [string, unknown];
    if (verb === 'EVENT') {
      const id = (arg as { id: string }).id;
      this.events.push(id);
      if (this.holding) this.held.push({ ws, id });
      else ws.send(JSON.stringify(['OK', id, true, '']));
    } else if (verb === 'REQ') {
      const content = 'x'.repeat(STREAMED.bytes);
      for (let i = 0; i < STREAMED.messages; i++) {
        ws.send(JSON.stringify(['EVENT', arg, { id: String(i), kind: 1, content }]));
      }
      ws.send(JSON.stringify(['EOSE', arg]));
    }
  }
}

describe('the drain against clients that do not play along', { timeout: 180_000 }, () => {
  let sick: StandInRelay;
  let well: StandInRelay;
  let gw: GatewayUnderTest;
  const sockets: { destroy(): void }[] = [];
  /** A client on the healthy node, writing throughout: every EVENT must get its OK. */
  let served: { stop: () => Promise<number> } | undefined;

  const multipliers = (nodes: Record<string, number | null>) =>
    admin(gw, 'POST', '/admin/flow-control', {
      nodes: Object.fromEntries(Object.entries(nodes).map(([id, m]) => [id, { multiplier: m }])),
    });
  const metric = async (name: string, labels: Record<string, string>) =>
    metricSum(await metricsOf(gw.adminUrl), name, labels);

  before(async () => {
    [sick, well] = await Promise.all([StandInRelay.start(), StandInRelay.start()]);
    gw = await startGateway(
      'iovalkey',
      'standalone',
      [
        { id: 'sick', url: sick.url },
        { id: 'well', url: well.url },
      ],
      {
        routing: 'headroom',
        quotas: {
          keyPrefix: uniquePrefix('drain-hostile'),
          tiers: { default: { write: { points: 1000, windowSec: 60 } } },
        },
        identity: { order: ['pubkey', 'ip'] },
        // Authors are charged on the relay's OK: what the move waits for.
        nostr: { verify: 'relay' },
        pressure: { drain: DRAIN },
      },
    );
    // The healthy node is the one new connections avoid until the hostile clients are placed.
    assert.equal((await multipliers({ well: 0.01 })).status, 200);
  });

  after(async () => {
    sockets.forEach((s) => s.destroy());
    await served?.stop().catch(() => undefined);
    await stopAll(gw?.proc);
    await Promise.all([sick?.close(), well?.close()]);
  });

  /** Open a connection and check which stand-in took it. */
  async function placed<T>(open: () => Promise<T>, on: StandInRelay): Promise<T> {
    const before = on.connections;
    const conn = await open();
    await waitFor('the relay socket', () => on.connections === before + 1);
    return conn;
  }

  /** A client that never reads: the upgrade's socket stays paused, and nothing reads it. */
  let stuck: net.Socket;
  /** A client whose EVENTs await the relay's OKs when it is moved, and that then leaves. */
  let leaving: RawNostr;
  const sk = generateSecretKey();
  const awaited = [1, 2, 3].map((i) => signedEvent(1, `awaited ${i}`, sk));

  it('places both on the node about to fall sick, one not reading, one awaiting OKs', async () => {
    const answer = await placed(() => rawUpgrade(gw.url, { from: '127.0.31.2' }), sick);
    assert.equal(answer.status, 101);
    stuck = answer.socket;
    sockets.push(stuck);
    stuck.write(clientTextFrame(JSON.stringify(['REQ', 's', { kinds: [1] }])));
    await waitFor('the gateway holding bytes for it', async () => {
      return (await metric('sluice_slow_clients_total', { action: 'paused' })) >= 1;
    });

    leaving = await placed(() => RawNostr.open(gw.url, '127.0.31.3'), sick);
    sockets.push(leaving.socket);
    sick.holding = true;
    for (const e of awaited) leaving.send(['EVENT', e]);
    await waitFor('the relay holding its EVENTs', () =>
      awaited.every((e) => sick.events.includes(e.id)),
    );

    // The node falls sick; another client, on the healthy one, writes from now on.
    assert.equal((await multipliers({ well: null, sick: 0.01 })).status, 200);
    const nostr = await placed(() => NostrClient.connect(gw.url, '127.0.31.9'), well);
    served = writeThroughout(nostr);
  });

  it('a client that never reads is cut after the grace once moved, its bytes released', async () => {
    const gwPort = Number(new URL(gw.url).port);
    assert.ok(connectionHeld(gwPort, stuck.localPort!), 'held before the move');
    const drained = () => metric('sluice_websockets_drained_total', { node: 'sick' });
    // Idle (nothing of it in flight): the first moved.
    await waitFor('its move', async () => (await drained()) >= 1);
    const movedAt = Date.now();
    // The other one is moved next, and leaves during its settle period, before any OK.
    const left = (async () => {
      await waitFor('the next move', async () => (await drained()) >= 2, 10_000);
      leaving.close();
    })();
    await waitFor(
      'the gateway to let go of the connection',
      () => !connectionHeld(gwPort, stuck.localPort!),
      LET_GO_WITHIN_MS,
    );
    assert.ok(Date.now() - movedAt < LET_GO_WITHIN_MS);
    await left;
  });

  it('a client that closes while its move waits for OKs still has its awaited EVENTs charged', async () => {
    await waitFor(
      'the gateway done with it (its settle period over), the served client left alone',
      async () => (await metric('sluice_websockets_open', {})) === 1,
      DRAIN.settleMs + 5000,
    );
    sick.release();
    const pk = `pk:${getPublicKey(sk)}`;
    await waitFor('the author charged for each', async () => (await writesConsumed(gw, pk)) === 3);
    assert.equal(await writesConsumed(gw, 'ip:127.0.31.3'), 3, 'and the sender');

    const oks = await served!.stop();
    served = undefined;
    assert.ok(oks >= 5, `the other client was served throughout (${oks} OKs)`);
  });
});

/** Write an EVENT every 200 ms and require its OK; stop() returns how many were answered. */
function writeThroughout(nostr: NostrClient): { stop: () => Promise<number> } {
  let running = true;
  let oks = 0;
  const loop = (async () => {
    const sk = generateSecretKey();
    for (let i = 0; running; i++) {
      const e = signedEvent(1, `served ${i}`, sk);
      const ok = await nostr.okFor(e.id, ['EVENT', e], 5000);
      assert.equal(ok[2], true, JSON.stringify(ok));
      oks++;
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      nostr.close();
      return oks;
    },
  };
}
