import { createHmac } from 'node:crypto';

/** A client identity after hashing: the only form in which an identity reaches Valkey. */
export type ClientKey = string & { readonly __brand: 'ClientKey' };

/**
 * Salt for the identity hash. Every gateway sharing a quota must use the same salt, so it
 * comes from configuration; the default keeps keys stable for single-operator setups.
 */
export const DEFAULT_KEY_SALT = 'sluice-v1';

/**
 * Hash an identity (IP, pubkey, API key) into a key part. The hash tag sits on the client
 * hash so that, in cluster mode, clients spread over all slots while each client's keys
 * share one slot. 22 base64url characters carry 132 bits: collisions are not a concern,
 * and the raw identity (possibly personal data or a secret) never appears in Valkey.
 */
export function clientKey(identity: string, salt: string = DEFAULT_KEY_SALT): ClientKey {
  const digest = createHmac('sha256', salt).update(identity).digest('base64url').slice(0, 22);
  return `{${digest}}` as ClientKey;
}
