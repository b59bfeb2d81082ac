import { lawParamsKey } from '../../src/pressure/laws/law-params.js';
import { createStore } from '../../src/store/index.js';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { storeOptions } from './env.js';

/**
 * Remove the control-law parameters the admin endpoint left in Valkey for these nodes. They
 * have no lease, so a file that failed before resetting them would steer the feeds of the
 * next file using the same node ids: a test that relies on the defaults clears them first.
 */
export async function clearLawParams(
  client: ClientKind,
  mode: Topology,
  nodeIds: string[],
): Promise<void> {
  const store = await createStore(storeOptions(client, mode));
  try {
    await Promise.all(nodeIds.map((id) => store.kv.del(lawParamsKey(id))));
  } finally {
    await store.close();
  }
}
