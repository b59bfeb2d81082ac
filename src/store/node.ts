import { Redis as IoValkey } from 'iovalkey';
import { StoreConnectError, describeError } from './errors.js';
import type { NodeAddress } from './options.js';

/** A plain connection to one Valkey node, for administration (cluster forming, status, tests). */
export interface NodeConnection {
  readonly address: NodeAddress;
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  close(): void;
}

/**
 * Connect to exactly one node, without retries or an offline queue: administration wants a
 * clear failure, not a client that waits for the node to appear.
 */
export async function openNodeConnection(
  address: NodeAddress,
  timeoutMs = 1000,
): Promise<NodeConnection> {
  const client = new IoValkey({
    host: address.host,
    port: address.port,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs * 5,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    enableReadyCheck: false,
  });
  let lastError: unknown;
  client.on('error', (err: unknown) => {
    lastError = err;
  });
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw new StoreConnectError(
      `cannot connect to ${address.host}:${address.port}: ${describeError(lastError ?? err)}`,
    );
  }
  return {
    address,
    call: (command, ...args) => client.call(command, ...args),
    close: () => client.disconnect(),
  };
}
