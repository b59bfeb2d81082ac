/**
 * Glide's commands leave in one socket write per event-loop turn (see clients/glide-writes.ts), with
 * every answer still matched to its command, on both topologies.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import net from 'node:net';
import type { Socket } from 'node:net';
import { openGlide } from '../../src/store/clients/glide.js';
import { parseStoreOptions } from '../../src/store/options.js';
import { MODES, storeOptions, uniquePrefix } from '../helpers/env.js';

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
        const answers: Promise<unknown>[] = [];
        let accepted = 0;
        const server = net.createServer((conn) => {
          accepted++;
          conn.on('data', () => {
            const i = answers.length;
            answers.push(client.get(keys[i % keys.length]!));
          });
        });
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const port = (server.address() as net.AddressInfo).port;
        const senders = await Promise.all(
          Array.from(
            { length: 50 },
            () =>
              new Promise<Socket>((resolve) => {
                const s = net.connect(port, '127.0.0.1', () => resolve(s));
              }),
          ),
        );
        try {
          const deadline = Date.now() + 10_000;
          // Every connection accepted first, so the 50 bytes arrive in one turn.
          while (accepted < senders.length) {
            assert.ok(Date.now() < deadline, `${accepted} of 50 connections accepted`);
            await new Promise((r) => setTimeout(r, 5));
          }
          const before = writes;
          for (const s of senders) s.write('x');
          while (answers.length < senders.length) {
            assert.ok(Date.now() < deadline, `${answers.length} of 50 data events arrived`);
            await new Promise((r) => setTimeout(r, 5));
          }
          const values = await Promise.all(answers);
          assert.deepEqual(
            values.map(String),
            answers.map((_, i) => `v${i % keys.length}`),
            'each answer belongs to its command',
          );
          assert.ok(writes - before <= 10, `50 GETs left in ${writes - before} writes`);
        } finally {
          for (const s of senders) s.destroy();
          server.close();
        }
        await Promise.all(keys.map((k) => client.del([k])));
      } finally {
        client.close();
      }
    });
  }
});
