/**
 * iovalkey's commands sent on their own (the lease takes: autoPipeliningIgnoredCommands) leave
 * in one socket write per event-loop turn and node (see clients/io-writes.ts), each answer
 * still its command's, on both topologies: through a client left alone they take a write each.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Socket } from 'node:net';
import { Cluster as IoValkeyCluster, Redis as IoValkey } from 'iovalkey';
import { coalesceClientWrites } from '../../src/store/clients/io-writes.js';
import type { IoClientLike } from '../../src/store/clients/io-writes.js';
import { MODES, nodesFor, uniquePrefix } from '../helpers/env.js';
import { commandsFromOneTurn } from '../helpers/one-turn.js';
import type { Topology } from '../../src/store/options.js';

type Client = IoValkey | IoValkeyCluster;

function connect(mode: Topology): Client {
  const nodes = nodesFor(mode);
  // GET stands for a lease take: auto-pipelining on, as the gateway runs, and GET sent alone.
  const options = {
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: ['get'],
    lazyConnect: true,
  };
  return mode === 'cluster'
    ? new IoValkeyCluster(nodes, options)
    : new IoValkey({ ...nodes[0]!, ...options });
}

/** Socket writes (each a write or writev syscall) of every node connection, counted. */
function countWrites(client: Client): () => number {
  let writes = 0;
  const nodes = client instanceof IoValkeyCluster ? client.nodes() : [client];
  for (const node of nodes) {
    const socket = (
      node as unknown as { stream: Socket & { _writeGeneric: (...args: unknown[]) => unknown } }
    ).stream;
    const generic = socket._writeGeneric.bind(socket);
    socket._writeGeneric = (...args: unknown[]) => {
      writes++;
      return generic(...args);
    };
  }
  return () => writes;
}

describe('iovalkey writes coalesced per event-loop turn', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`sends the commands of one turn in a write a node, each answered rightly (${mode})`, async () => {
      const prefix = uniquePrefix('io-writes');
      const keys = Array.from({ length: 50 }, (_, i) => `${prefix}:{k${i}}`);
      const writesOf = async (coalesced: boolean): Promise<number> => {
        const client = connect(mode);
        try {
          if (coalesced) coalesceClientWrites(client as unknown as IoClientLike);
          await client.connect();
          await Promise.all(keys.map((k, i) => client.set(k, `v${i}`)));
          const writes = countWrites(client);
          const values = await commandsFromOneTurn((i) => client.get(keys[i]!));
          assert.deepEqual(
            values,
            keys.map((_, i) => `v${i}`),
            'each answer belongs to its command',
          );
          return writes();
        } finally {
          await client.del(...(mode === 'cluster' ? [keys[0]!] : keys)).catch(() => undefined);
          client.disconnect();
        }
      };
      const alone = await writesOf(false);
      const coalesced = await writesOf(true);
      const primaries = mode === 'cluster' ? 3 : 1;
      assert.ok(alone >= 25, `left alone, 50 GETs took ${alone} writes`);
      assert.ok(coalesced <= 3 * primaries, `coalesced, 50 GETs took ${coalesced} writes`);
    });
  }
});
