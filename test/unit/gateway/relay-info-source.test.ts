/**
 * The NIP-11 fetches the gateway makes for its clients, in process with a fake fetcher: one
 * fetch per document shared by every client waiting for it, cancelled when the last one
 * leaves, and at most RELAY_INFO_MAX_FETCHES at once (through sockets:
 * test/hostile/nip11-amplification.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RELAY_INFO_MAX_FETCHES, RelayInfoSource } from '../../../src/gateway/relay-info.js';
import type { Fetched } from '../../../src/gateway/relay-info.js';

/** A fetcher in process: each fetch waits until the test answers it, or until it is cancelled. */
class FakeFetches {
  readonly started: { url: string; cancel: AbortSignal; answer: (f: Fetched) => void }[] = [];
  readonly fetcher = (url: string, cancel: AbortSignal): Promise<Fetched> =>
    new Promise((answer) => {
      this.started.push({ url, cancel, answer });
      cancel.addEventListener('abort', () =>
        answer({ ok: false, gone: true, reason: 'cancelled' }),
      );
    });
}

const DOC: Fetched = { ok: true, doc: { name: 'relay' }, cors: {} };

describe('NIP-11 fetches shared by the clients waiting for them', { timeout: 10_000 }, () => {
  it('a client leaving does not cancel a fetch another client waits for; the last one does', async () => {
    const fetches = new FakeFetches();
    const source = new RelayInfoSource(fetches.fetcher);
    const [a, b, c] = [new AbortController(), new AbortController(), new AbortController()];
    const got = [source.get('http://r/', a.signal), source.get('http://r/', b.signal)];
    assert.equal(fetches.started.length, 1, 'one fetch for both');
    a.abort();
    assert.deepEqual(await got[0], { ok: false, gone: true, reason: 'the client went away' });
    assert.equal(fetches.started[0]!.cancel.aborted, false, 'b still waits: not cancelled');
    const late = source.get('http://r/', c.signal);
    b.abort();
    assert.equal(fetches.started[0]!.cancel.aborted, false, 'c joined and still waits');
    fetches.started[0]!.answer(DOC);
    assert.deepEqual(await late, DOC);
    await got[1];

    // Every waiter gone before the answer: cancelled, forgotten, and the next asker refetches.
    const d = new AbortController();
    const e = new AbortController();
    void source.get('http://r/other', d.signal);
    void source.get('http://r/other', e.signal);
    d.abort();
    e.abort();
    assert.equal(fetches.started[1]!.cancel.aborted, true, 'nobody waits: cancelled');
    const again = source.get('http://r/other', new AbortController().signal);
    assert.equal(fetches.started.length, 3, 'a cancelled fetch is not reused');
    fetches.started[2]!.answer(DOC);
    assert.deepEqual(await again, DOC);
  });

  it('a client gone before it asks starts no fetch; a cancelled fetch frees its place in the bound', async () => {
    const fetches = new FakeFetches();
    const source = new RelayInfoSource(fetches.fetcher);
    const gone = new AbortController();
    gone.abort();
    assert.equal((await source.get('http://r/', gone.signal)).ok, false);
    assert.equal(fetches.started.length, 0);

    const clients = Array.from({ length: RELAY_INFO_MAX_FETCHES }, () => new AbortController());
    clients.forEach((c, i) => void source.get(`http://r/${i}`, c.signal));
    const busy = await source.get('http://r/one-more', new AbortController().signal);
    assert.equal(!busy.ok && busy.busy, true, 'past the bound: busy');
    clients[0]!.abort();
    await new Promise((r) => setImmediate(r));
    void source.get('http://r/one-more', new AbortController().signal);
    assert.equal(fetches.started.length, RELAY_INFO_MAX_FETCHES + 1, 'its place went to another');
  });
});
