import { Lru } from '../util/lru.js';
import { DEFAULT_MAX_TRACKED_CLIENTS } from '../config/schema.js';
import { clientKey } from '../store/keys.js';
import type { ClientKey } from '../store/keys.js';

/**
 * The salted hash of identities seen lately, so a client's HMAC is computed once rather than
 * on every request: at most `max` identities, the least recently used forgotten first. Filled
 * under one salt: a different salt empties it, so no key made with another salt is returned.
 */
export class IdentityKeys {
  private readonly keys: Lru<string, ClientKey>;
  private salt: string | undefined;

  constructor(readonly max: number) {
    this.keys = new Lru<string, ClientKey>({ max });
  }

  /** clientKey(value, salt), from the cache when it holds it. */
  keyOf(value: string, salt: string): ClientKey {
    if (salt !== this.salt) {
      this.keys.clear();
      this.salt = salt;
    }
    let key = this.keys.get(value);
    if (key === undefined) {
      key = clientKey(value, salt);
      this.keys.set(value, key);
    }
    return key;
  }

  get size(): number {
    return this.keys.size;
  }
}

let shared = new IdentityKeys(DEFAULT_MAX_TRACKED_CLIENTS);

/** The process's identity cache, used by makeIdentity. */
export function identityKeys(): IdentityKeys {
  return shared;
}

/** Bound the process's identity cache (limits.maxTrackedClients); emptied when it changes. */
export function boundIdentityKeys(max: number): void {
  if (shared.max !== max) shared = new IdentityKeys(max);
}
