/**
 * Glide's commands leave in one socket write per event-loop turn (see clients/glide-writes.ts), with
 * every answer still matched to its command, on both topologies.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Socket } from 'node:net';
import { openGlide } from '../../src/store/clients/glide.js';
import { parseStoreOptions } from '../../src/store/options.js';
import { MODES, storeOptions, uniquePrefix } from '../helpers/env.js';
import { commandsFromOneTurn } from '../helpers/one-turn.js';

describe('glide writes coalesced per event-loop turn', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`sends the commands of one turn in a few writes, each answered rightly (${mode})`, async () => {
      const { client, settings } = await openGlide(
        parseStoreOptions(storeOptions('valkey-glide', mode)),
      );
      try {
        assert.equal(settings.client, 'valkey-glide');
        assert.match(String(settings.autoPipelining), /coalesced/, 'the patch applied');
        const socket = (client as unknown as { socket: Socket }).socket;
        let writes = 0;
        const write = socket.write.bind(socket);
        socket.write = ((...args: Parameters<Socket['write']>) => {
          writes++;
          return write(...args);
        }) as Socket['write'];
        const prefix = uniquePrefix('glide-writes');
        const keys = Array.from({ length: 200 }, (_, i) => `${prefix}:{k${i}}`);
        const sets = await Promise.all(keys.map((k, i) => client.set(k, `v${i}`)));
        assert.ok(sets.every((r) => r === 'OK'));
        // Commands issued from many sockets' data events in one event-loop turn, as a loaded
        // gateway issues them: glide alone writes once per event; coalesced, once per turn.
        const before = writes;
        const values = await commandsFromOneTurn((i) => client.get(keys[i % keys.length]!));
        assert.deepEqual(
          values.map(String),
          values.map((_, i) => `v${i % keys.length}`),
          'each answer belongs to its command',
        );
        assert.ok(writes - before <= 10, `50 GETs left in ${writes - before} writes`);
        await Promise.all(keys.map((k) => client.del([k])));
      } finally {
        client.close();
      }
    });
  }
});
