/** HotCounter: counts added on the hot path are exact at every scrape, never twice. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { HotCounter } from '../../../src/gateway/hot-counter.js';

async function values(c: HotCounter) {
  const got = await c.counter.get();
  return Object.fromEntries(got.values.map((v) => [Object.values(v.labels).join('/'), v.value]));
}

describe('HotCounter', { timeout: 5_000 }, () => {
  it('a scrape reads every count by its labels; counts since the last scrape are added', async () => {
    const registry = new Registry();
    const c = new HotCounter('t_total', 'test', ['outcome', 'class', 'node'], registry);
    for (let i = 0; i < 5; i++) c.add(1, 'allowed', 'write', 'relay-a');
    c.add(1, 'limited', 'write', 'relay-a');
    c.add(2, 'allowed', 'read', 'relay-b');
    assert.deepEqual(await values(c), {
      'allowed/write/relay-a': 5,
      'limited/write/relay-a': 1,
      'allowed/read/relay-b': 2,
    });
    // Scraping again adds nothing twice.
    assert.deepEqual(await values(c), {
      'allowed/write/relay-a': 5,
      'limited/write/relay-a': 1,
      'allowed/read/relay-b': 2,
    });
    c.add(1, 'allowed', 'write', 'relay-a');
    const text = await registry.metrics();
    assert.match(text, /t_total\{outcome="allowed",class="write",node="relay-a"\} 6/);
  });

  it('one label: the others are not shown', async () => {
    const registry = new Registry();
    const c = new HotCounter('f_total', 'test', ['type'], registry);
    c.add(1, 'EVENT');
    c.add(1, 'EVENT');
    c.add(1, 'REQ');
    const got = await c.counter.get();
    assert.deepEqual(
      got.values.map((v) => [v.labels, v.value]),
      [
        [{ type: 'EVENT' }, 2],
        [{ type: 'REQ' }, 1],
      ],
    );
  });
});
