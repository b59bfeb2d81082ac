import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { NostrEvent } from 'nostr-tools/pure';
import { WebSocket } from 'ws';
import { sluice } from '../helpers/cli.js';
import { relayAdminHeaders, spawnSluice, startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const MiB = 1024 * 1024;
type Message = [string, ...unknown[]];

/** A minimal Nostr client: every frame goes to an inbox that tests take from in order. */
class Client {
  private readonly inbox: Message[] = [];
  private waiters: (() => void)[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.inbox.push(JSON.parse((data as Buffer).toString('utf8')) as Message);
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static async open(url: string): Promise<Client> {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new Client(ws);
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Take the first received message that `match` accepts, waiting for it if need be. */
  async take(match: (m: Message) => boolean, timeoutMs = 10_000): Promise<Message> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.inbox.findIndex(match);
      if (i !== -1) return this.inbox.splice(i, 1)[0]!;
      if (Date.now() > deadline) {
        throw new Error(`no matching message; inbox: ${JSON.stringify(this.inbox).slice(0, 500)}`);
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  /** Everything left in the inbox (and drop it). */
  drain(): Message[] {
    return this.inbox.splice(0);
  }

  async publish(event: unknown): Promise<Message> {
    this.send(['EVENT', event]);
    // The relay echoes the id when it is one (64 hex), else answers with "".
    const id = (event as { id?: unknown } | null)?.id;
    const expected = typeof id === 'string' && /^[0-9a-f]{64}$/.test(id) ? id : '';
    return this.take((m) => m[0] === 'OK' && m[1] === expected);
  }

  /** REQ and collect the stored events up to EOSE. */
  async query(subId: string, ...filters: object[]): Promise<NostrEvent[]> {
    this.send(['REQ', subId, ...filters]);
    await this.take((m) => m[0] === 'EOSE' && m[1] === subId);
    const events: NostrEvent[] = [];
    for (let i; (i = this.inbox.findIndex((m) => m[0] === 'EVENT' && m[1] === subId)) !== -1;) {
      events.push(this.inbox.splice(i, 1)[0]![2] as NostrEvent);
    }
    return events;
  }

  close(): void {
    this.ws.close();
  }
}

const keys = { a: generateSecretKey(), b: generateSecretKey() };

function sign(
  secret: Uint8Array,
  fields: { kind?: number; created_at?: number; content?: string; tags?: string[][] } = {},
): NostrEvent {
  const event = finalizeEvent(
    {
      kind: fields.kind ?? 1,
      created_at: fields.created_at ?? Math.floor(Date.now() / 1000),
      tags: fields.tags ?? [],
      content: fields.content ?? `note ${Math.random()}`,
    },
    secret,
  );
  // A plain copy: what a relay sends back has no "verified" symbol to compare against.
  return JSON.parse(JSON.stringify(event)) as NostrEvent;
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  assert.equal(res.status, 200, `${url}: ${res.status} ${await res.clone().text()}`);
  return (await res.json()) as T;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // Leave it as text.
  }
  return { status: res.status, json };
}

interface Stats {
  nodeId: string;
  rssBytes: number;
  rssAnonBytes: number;
  heapUsedBytes: number;
  memtableBytes: number;
  backlogBytes: number;
  backlogEvents: number;
  drainRateBytesPerSec: number;
  drainedBytesPerSec: number;
  flushedBytes: number;
  dataFileBytes: number;
  eventsStored: number;
  eventsRejected: Record<string, number>;
  spikeBytes: number;
  spikesTotal: number;
  workDigest: string;
}

const stats = (relay: RelayProcess) => getJson<Stats>(`${relay.url}/stats`);

/** Poll /stats until `done` holds; fails with the last stats after `timeoutMs`. */
async function statsUntil(
  relay: RelayProcess,
  done: (s: Stats) => boolean,
  timeoutMs = 30_000,
): Promise<Stats> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await stats(relay);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`condition not reached: ${JSON.stringify(s)}`);
    await sleep(100);
  }
}

describe('sluice relay: Nostr over WebSocket', { timeout: 180_000 }, () => {
  let relay: RelayProcess;
  let client: Client;

  before(async () => {
    relay = await startRelay({ nodeId: 'ws-a' });
    client = await Client.open(relay.url);
  });
  after(async () => {
    client?.close();
    assert.equal(await relay?.stop(), 0, 'the relay exits 0 on SIGTERM');
  });

  it('stores an EVENT (OK true) and a REQ returns it, then EOSE', async () => {
    const event = sign(keys.a, { content: 'hello relay' });
    assert.deepEqual(await client.publish(event), ['OK', event.id, true, '']);
    const found = await client.query('one', { ids: [event.id] });
    assert.deepEqual(found, [event]);
  });

  it('filters by ids, authors, kinds, since/until and limit, newest first', async () => {
    const base = 1_600_000_000;
    const a = [0, 1, 2, 3].map((i) => sign(keys.a, { kind: 7001 + (i % 2), created_at: base + i }));
    const b = [0, 1].map((i) => sign(keys.b, { kind: 7001, created_at: base + 10 + i }));
    for (const e of [...a, ...b]) assert.equal((await client.publish(e))[2], true);
    const ids = (events: NostrEvent[]) => events.map((e) => e.id);
    const pkA = getPublicKey(keys.a);
    const pkB = getPublicKey(keys.b);
    const all = [...a, ...b];

    assert.deepEqual(ids(await client.query('f1', { ids: [a[2]!.id, b[0]!.id] })), [
      b[0]!.id,
      a[2]!.id,
    ]);
    assert.deepEqual(
      ids(await client.query('f2', { authors: [pkB], kinds: [7001] })),
      [b[1]!.id, b[0]!.id],
      'newest first',
    );
    assert.deepEqual(ids(await client.query('f3', { authors: [pkA], kinds: [7002] })), [
      a[3]!.id,
      a[1]!.id,
    ]);
    assert.deepEqual(
      ids(await client.query('f4', { kinds: [7001, 7002], since: base + 1, until: base + 10 })),
      [b[0]!.id, a[3]!.id, a[2]!.id, a[1]!.id],
    );
    assert.deepEqual(ids(await client.query('f5', { kinds: [7001, 7002], limit: 3 })), [
      b[1]!.id,
      b[0]!.id,
      a[3]!.id,
    ]);
    // Two filters are OR-ed; the result is one newest-first list without duplicates.
    assert.deepEqual(
      ids(
        await client.query('f6', { authors: [pkB], kinds: [7001] }, { ids: [a[0]!.id, b[0]!.id] }),
      ),
      [b[1]!.id, b[0]!.id, a[0]!.id],
    );
    assert.deepEqual(
      ids(await client.query('f7', { kinds: [7001, 7002], authors: [pkA, pkB] })).sort(),
      ids(all).sort(),
    );
    assert.deepEqual(await client.query('f8', { kinds: [7003] }), []);
  });

  it('filters by tags (#e, #p, ...)', async () => {
    const target = 'ab'.repeat(32);
    const tagged = sign(keys.a, {
      kind: 7100,
      tags: [
        ['e', target],
        ['t', 'sluice'],
      ],
    });
    const other = sign(keys.a, { kind: 7100, tags: [['t', 'other']] });
    for (const e of [tagged, other]) assert.equal((await client.publish(e))[2], true);
    assert.deepEqual(await client.query('t1', { kinds: [7100], '#e': [target] }), [tagged]);
    assert.deepEqual(await client.query('t2', { '#t': ['sluice', 'none'] }), [tagged]);
  });

  it('pushes new matching events to an open subscription until CLOSE', async () => {
    const live = await Client.open(relay.url);
    try {
      assert.deepEqual(await live.query('live', { kinds: [7200] }), []);
      const first = sign(keys.b, { kind: 7200 });
      const unrelated = sign(keys.b, { kind: 7201 });
      await client.publish(unrelated);
      await client.publish(first);
      assert.deepEqual(await live.take((m) => m[0] === 'EVENT'), ['EVENT', 'live', first]);

      live.send(['CLOSE', 'live']);
      // A REQ after the CLOSE is answered in order, so the CLOSE has been applied by then.
      await live.query('probe', { ids: [first.id] });
      await client.publish(sign(keys.b, { kind: 7200 }));
      await live.query('probe2', { ids: [first.id] });
      assert.deepEqual(
        live.drain().filter((m) => m[1] === 'live'),
        [],
        'no events after CLOSE',
      );
    } finally {
      live.close();
    }
  });

  it('refuses invalid events with OK false "invalid:" and a reason', async () => {
    const good = sign(keys.a);
    const badSig = { ...good, sig: (good.sig[0] === '0' ? '1' : '0') + good.sig.slice(1) };
    const badId = { ...sign(keys.a), content: 'tampered' };
    const cases: [unknown, RegExp][] = [
      [badSig, /^invalid: .*signature/],
      [badId, /^invalid: .*id/],
      [{ ...sign(keys.a), kind: 'one' }, /^invalid: kind/],
      [{ ...sign(keys.a), tags: [['ok', 1]] }, /^invalid: tags/],
      [{ id: 'nope' }, /^invalid: id/],
      [42, /^invalid: /],
    ];
    for (const [event, reason] of cases) {
      const ok = await client.publish(event);
      assert.equal(ok[0], 'OK');
      assert.equal(ok[2], false, JSON.stringify(event).slice(0, 80));
      assert.match(String(ok[3]), reason);
    }
    client.send(['EVENT']);
    assert.deepEqual(await client.take((m) => m[0] === 'OK'), [
      'OK',
      '',
      false,
      'invalid: EVENT needs an event',
    ]);
    assert.deepEqual(await client.query('none', { ids: [badSig.id, badId.id] }), []);
  });

  it('answers an unreadable frame with NOTICE and keeps the connection', async () => {
    client.send('this is not json');
    assert.match(String((await client.take((m) => m[0] === 'NOTICE'))[1]), /^invalid: /);
    client.send(['PUBLISH', {}]);
    assert.match(String((await client.take((m) => m[0] === 'NOTICE'))[1]), /^invalid: .*PUBLISH/);
    client.send(['REQ', 'bad', { kinds: 'x' }]);
    assert.match(String((await client.take((m) => m[0] === 'CLOSED'))[2]), /^invalid: kinds/);
    const event = sign(keys.a);
    assert.deepEqual(await client.publish(event), ['OK', event.id, true, '']);
  });

  it('accepts a duplicate as OK true "duplicate:" and stores it once', async () => {
    const event = sign(keys.a, { kind: 7300 });
    assert.deepEqual(await client.publish(event), ['OK', event.id, true, '']);
    assert.deepEqual(await client.publish(event), [
      'OK',
      event.id,
      true,
      'duplicate: already have this event',
    ]);
    assert.equal((await client.query('dup', { kinds: [7300] })).length, 1);
  });

  it('answers every EVENT of a pipelined burst exactly once', async () => {
    const events: unknown[] = Array.from({ length: 60 }, (_, i) =>
      i % 5 === 4 ? { ...sign(keys.b), content: 'forged' } : sign(keys.b, { kind: 7400 }),
    );
    for (const e of events) client.send(['EVENT', e]);
    const oks = [];
    for (let i = 0; i < events.length; i++) oks.push(await client.take((m) => m[0] === 'OK'));
    assert.deepEqual(
      oks.map((m) => m[1]),
      events.map((e) => (e as NostrEvent).id),
    );
    assert.equal(oks.filter((m) => m[2] === true).length, 48);
    await sleep(200);
    assert.deepEqual(
      client.drain().filter((m) => m[0] === 'OK'),
      [],
      'no second answer',
    );
  });
});

describe('sluice relay: HTTP', { timeout: 180_000 }, () => {
  let relay: RelayProcess;

  before(async () => {
    relay = await startRelay({ nodeId: 'http-a' });
  });
  after(async () => {
    await relay?.stop();
  });

  it('serves the NIP-11 document with CORS headers', async () => {
    const res = await fetch(relay.url + '/', { headers: { accept: 'application/nostr+json' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), '*');
    assert.match(res.headers.get('content-type') ?? '', /application\/nostr\+json/);
    const info = (await res.json()) as Record<string, unknown>;
    assert.equal(info.software, 'sluice-relay');
    assert.deepEqual(info.supported_nips, [1, 11]);
    assert.equal(typeof info.version, 'string');
    const limitation = info.limitation as Record<string, unknown>;
    assert.equal(typeof limitation.max_message_length, 'number');

    const plain = await fetch(relay.url + '/');
    assert.equal(plain.status, 200);
    assert.match(await plain.text(), /WebSocket/);
  });

  it('stores a POSTed event and returns it from GET /events with filters', async () => {
    const older = sign(keys.a, { kind: 7500, created_at: 1_700_000_000 });
    const newer = sign(keys.a, { kind: 7500, created_at: 1_700_000_100 });
    for (const e of [older, newer]) {
      assert.deepEqual(await post(`${relay.url}/events`, e), {
        status: 200,
        json: { id: e.id, accepted: true },
      });
    }
    const dup = await post(`${relay.url}/events`, older);
    assert.equal(dup.status, 200);
    assert.match(String((dup.json as { message: string }).message), /^duplicate:/);

    const pk = getPublicKey(keys.a);
    const q = (params: string) => getJson<NostrEvent[]>(`${relay.url}/events?${params}`);
    assert.deepEqual(await q(`authors=${pk}&kinds=7500`), [newer, older]);
    assert.deepEqual(await q(`ids=${older.id},${newer.id}&limit=1`), [newer]);
    assert.deepEqual(await q(`kinds=7500&until=1700000050`), [older]);
    assert.deepEqual(await q(`kinds=7500&since=1700000050`), [newer]);

    // And the same event over WebSocket.
    const client = await Client.open(relay.url);
    try {
      assert.deepEqual(await client.query('http', { ids: [older.id] }), [older]);
    } finally {
      client.close();
    }
  });

  it('turns bad input away with 4xx and a message, and keeps serving', async () => {
    const forged = { ...sign(keys.a), content: 'changed' };
    const cases: [string, string | object, number, RegExp][] = [
      ['/events', forged, 400, /^invalid: .*id/],
      ['/events', '{"not json', 400, /^invalid: /],
      ['/events', [1, 2, 3], 400, /^invalid: /],
      ['/events', { content: 'x'.repeat(300 * 1024) }, 413, /^invalid: /],
    ];
    for (const [route, body, status, message] of cases) {
      const res = await post(relay.url + route, body);
      assert.equal(res.status, status, JSON.stringify(res.json));
      const json = res.json as { accepted: boolean; message: string };
      assert.equal(json.accepted, false);
      assert.match(json.message, message);
    }
    for (const query of ['kinds=abc', 'ids=xyz', 'limit=-1', 'since=soon', 'colour=red']) {
      const res = await fetch(`${relay.url}/events?${query}`);
      assert.equal(res.status, 400, query);
      assert.match(((await res.json()) as { error: string }).error, /^invalid: /);
    }
    const spike = await post(`${relay.url}/admin/spike`, { bytes: -1 }, relayAdminHeaders());
    assert.equal(spike.status, 400);
    assert.equal((await fetch(`${relay.url}/nope`)).status, 404);
    const s = await stats(relay);
    assert.ok(s.eventsRejected.bad_id! >= 1);
    assert.ok(s.eventsRejected.malformed! >= 1);
  });

  it('reports health, stats and Prometheus metrics', async () => {
    assert.deepEqual(await getJson(`${relay.url}/healthz`), { status: 'ok', nodeId: 'http-a' });
    const s = await stats(relay);
    assert.equal(s.nodeId, 'http-a');
    for (const key of [
      'rssBytes',
      'rssAnonBytes',
      'heapUsedBytes',
      'memtableBytes',
      'backlogBytes',
      'backlogEvents',
      'drainRateBytesPerSec',
      'drainedBytesPerSec',
      'flushedBytes',
      'eventsStored',
      'spikeBytes',
    ] as const) {
      assert.equal(typeof s[key], 'number', key);
    }
    assert.ok(s.rssAnonBytes > 0 && s.rssAnonBytes <= s.rssBytes);
    assert.ok(s.eventsStored >= 2);

    const res = await fetch(`${relay.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
    const text = await res.text();
    for (const name of [
      'relay_rss_bytes',
      'relay_rss_anon_bytes',
      'relay_heap_used_bytes',
      'relay_memtable_bytes',
      'relay_backlog_bytes',
      'relay_backlog_events',
      'relay_drain_rate_bytes_per_second',
      'relay_drained_bytes_per_second',
      'relay_flushed_bytes_total',
      'relay_events_stored',
      'relay_spike_bytes',
    ]) {
      assert.match(text, new RegExp(`^${name}\\{node_id="http-a"\\} \\d`, 'm'), name);
    }
    assert.match(text, /^relay_events_rejected_total\{reason="bad_id",node_id="http-a"\} [1-9]/m);
  });
});

describe('sluice relay: memory follows the backlog', { timeout: 180_000 }, () => {
  let relay: RelayProcess;
  const drain = 2 * MiB;

  before(async () => {
    relay = await startRelay({ nodeId: 'mem-a', drainBytesPerSec: drain });
  });
  after(async () => {
    await relay?.stop();
  });

  it('grows RSS and backlog while writes outpace the drain, and gives it back after', async () => {
    const client = await Client.open(relay.url);
    // Warm up (JIT, buffers) so the baseline is not taken from a cold process.
    for (let i = 0; i < 20; i++)
      await client.publish(sign(keys.a, { content: 'w'.repeat(60_000) }));
    await statsUntil(relay, (s) => s.backlogBytes === 0);
    const file = path.join(relay.dataDir, 'events.jsonl');
    const fileBefore = statSync(file).size;
    const base = await stats(relay);

    // ~56 MiB of 60 KiB events, signed up front so the relay sees them as fast as it can take them.
    const events = Array.from({ length: 950 }, (_, i) =>
      sign(keys.b, {
        kind: 7600,
        created_at: 1_700_000_000 + i,
        content: `${i}:`.padEnd(61_440, 'x'),
      }),
    );
    const written = events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0);
    const window = 32;
    for (let i = 0; i < events.length; i += window) {
      const batch = events.slice(i, i + window);
      for (const e of batch) client.send(['EVENT', e]);
      for (const e of batch) {
        const ok = await client.take((m) => m[0] === 'OK' && m[1] === e.id);
        assert.equal(ok[2], true, String(ok[3]));
      }
    }
    const peak = await stats(relay);
    const grew = peak.rssAnonBytes - base.rssAnonBytes;
    assert.ok(
      peak.backlogBytes > written * 0.4,
      `backlog ${peak.backlogBytes} of ${written} written`,
    );
    assert.ok(peak.memtableBytes >= peak.backlogBytes);
    assert.ok(peak.backlogEvents > 0);
    assert.ok(
      grew > peak.backlogBytes * 0.5,
      `RSS grew by ${grew} with ${peak.backlogBytes} in backlog`,
    );

    // No more writes: the backlog drains at the configured rate...
    const later = await statsUntil(relay, (s) => s.flushedBytes >= peak.flushedBytes + drain);
    assert.ok(later.backlogBytes < peak.backlogBytes);
    assert.ok(later.drainedBytesPerSec > 0 && later.drainedBytesPerSec <= drain * 2);
    // ... and, sped up at run time so the test does not wait half a minute, to zero.
    assert.deepEqual(
      await post(`${relay.url}/admin/drain`, { bytesPerSec: 64 * MiB }, relayAdminHeaders()),
      {
        status: 200,
        json: { drainRateBytesPerSec: 64 * MiB },
      },
    );
    const drained = await statsUntil(relay, (s) => s.backlogBytes === 0 && s.backlogEvents === 0);
    assert.equal(statSync(file).size - fileBefore, written, 'every accepted byte is on disk');
    assert.ok(drained.memtableBytes <= MiB, `memtable holds ${drained.memtableBytes}`);

    // Events written first were flushed long ago and are read back from the file.
    // Compared as key-sorted JSON text: a failure should not print 60 KiB of content.
    const text = (events: NostrEvent[]) =>
      JSON.stringify(events.map((e) => JSON.stringify(e, Object.keys(e).sort())));
    const same = (got: NostrEvent[], want: NostrEvent[]) =>
      assert.ok(
        text(got) === text(want),
        `got ${got.map((e) => e.id).join()}, want ${want.map((e) => e.id).join()}`,
      );
    const early = await client.query('early', { ids: events.slice(0, 3).map((e) => e.id) });
    same(early, events.slice(0, 3).reverse());
    same(await client.query('newest', { kinds: [7600], limit: 2 }), events.slice(-2).reverse());
    client.close();

    // Memory goes back to the system as the flushed slabs are freed: wait for it, with a deadline.
    const after = await statsUntil(
      relay,
      (s) => peak.rssAnonBytes - s.rssAnonBytes > grew / 2,
      10_000,
    ).catch(() => stats(relay));
    const gaveBack = peak.rssAnonBytes - after.rssAnonBytes;
    console.log(
      `rssAnon MiB: before ${mib(base.rssAnonBytes)}, peak ${mib(peak.rssAnonBytes)}, ` +
        `after drain ${mib(after.rssAnonBytes)}; written ${mib(written)}, ` +
        `peak backlog ${mib(peak.backlogBytes)}`,
    );
    assert.ok(gaveBack > grew / 2, `RSS gave back ${gaveBack} of ${grew}`);
  });

  it('holds an on-demand spike in RSS and releases it after holdMs', async () => {
    const before = await stats(relay);
    // Held long enough that a busy machine still reads it back while it is held.
    const res = await post(
      `${relay.url}/admin/spike`,
      { bytes: 64 * MiB, holdMs: 4000 },
      relayAdminHeaders(),
    );
    assert.equal(res.status, 200, JSON.stringify(res.json));
    const held = await stats(relay);
    assert.equal(held.spikeBytes, 64 * MiB);
    assert.ok(
      held.rssAnonBytes - before.rssAnonBytes > 48 * MiB,
      `RSS rose ${held.rssAnonBytes - before.rssAnonBytes}`,
    );
    // Released, and RSS back down (freed memory may leave the process a moment later).
    const released = await statsUntil(
      relay,
      (s) => s.spikeBytes === 0 && held.rssAnonBytes - s.rssAnonBytes > 48 * MiB,
      15_000,
    );
    assert.ok(
      held.rssAnonBytes - released.rssAnonBytes > 48 * MiB,
      `RSS fell ${held.rssAnonBytes - released.rssAnonBytes}`,
    );
  });
});

describe('sluice relay: options and lifecycle', { timeout: 180_000 }, () => {
  it('runs periodic spikes and the CPU workload, and says 1001 to sockets on SIGTERM', async () => {
    const relay = await startRelay({
      nodeId: 'opt-a',
      extraArgs: ['--spike-bytes', '8MiB', '--spike-every-ms', '200', '--work-iterations', '50'],
    });
    const ws = new WebSocket(relay.url.replace(/^http/, 'ws'));
    const closeCode = new Promise<number>((resolve) => ws.once('close', resolve));
    try {
      const s = await statsUntil(relay, (x) => x.spikesTotal >= 2, 10_000);
      assert.ok(s.spikesTotal >= 2);
      assert.equal((await post(`${relay.url}/events`, sign(keys.a))).status, 200);
      assert.doesNotMatch((await stats(relay)).workDigest, /^0+$/);
    } finally {
      assert.equal(await relay.stop(), 0);
    }
    assert.equal(await closeCode, 1001, 'open WebSockets are closed with 1001 (going away)');
  });

  it('keeps its events across a restart on the same data directory', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sluice-relay-restart-'));
    const args = ['relay', '--port', '0', '--node-id', 'restart-a', '--data-dir', dataDir];
    try {
      // Drain paused: the backlog is still in memory when SIGTERM arrives and must be written out.
      const first = await spawnSluice([...args, '--drain-bytes-per-sec', '0']);
      const events = [1, 2, 3].map((i) =>
        sign(keys.a, { kind: 7700, created_at: 1_700_000_000 + i }),
      );
      for (const e of events) assert.equal((await post(`${first.url}/events`, e)).status, 200);
      assert.equal(await first.stop(), 0);

      const second = await spawnSluice(args);
      try {
        assert.equal((await getJson<Stats>(`${second.url}/stats`)).eventsStored, 3);
        const again = await getJson<NostrEvent[]>(`${second.url}/events?kinds=7700`);
        assert.deepEqual(again, [...events].reverse());
        const dup = await post(`${second.url}/events`, events[0]);
        assert.match(String((dup.json as { message?: string }).message), /^duplicate:/);
      } finally {
        assert.equal(await second.stop(), 0);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses bad options with a clear message', () => {
    const cases: [string[], RegExp][] = [
      [['relay'], /--node-id/],
      [['relay', '--node-id', '../etc'], /not a node id/],
      [['relay', '--node-id', 'x', '--port', 'http'], /not a TCP port/],
      [['relay', '--node-id', 'x', '--drain-bytes-per-sec', 'fast'], /not a byte count/],
      [['relay', '--node-id', 'x', '--spike-bytes', '1MiB'], /--spike-every-ms/],
    ];
    for (const [args, message] of cases) {
      const result = sluice(args, process.env, 20_000);
      assert.notEqual(result.status, 0, args.join(' '));
      assert.match(result.stderr, message, args.join(' '));
    }
  });
});

function mib(bytes: number): string {
  return (bytes / MiB).toFixed(1);
}
