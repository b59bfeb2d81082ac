import { TimeUnit } from '@valkey/valkey-glide';
import type { RawClient } from './connect.js';
import { storeCall as wrap } from './errors.js';

/** The few plain commands the pressure feed and board need, the same for every client. */
export interface KeyValue {
  /** SET with a lease: the key disappears unless it is written again within `pxMs`. */
  setWithLease(key: string, value: string, pxMs: number): Promise<void>;
  /** SET without expiry. */
  set(key: string, value: string): Promise<void>;
  get(key: string): Promise<string | null>;
  /** SET NX with a lease: true when this call created the key, false when it existed. */
  claim(key: string, value: string, pxMs: number): Promise<boolean>;
  del(key: string): Promise<void>;
  /** PUBLISH; resolves with the number of subscribers that received it (cluster: on that node). */
  publish(channel: string, message: string): Promise<number>;
}

interface IoKv {
  set(key: string, value: string, px?: 'PX', ms?: number, nx?: 'NX'): Promise<unknown>;
  del(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  publish(channel: string, message: string): Promise<number>;
}

export function keyValue(raw: RawClient): KeyValue {
  if (raw.kind === 'valkey-glide') {
    const c = raw.client;
    return {
      setWithLease: (key, value, pxMs) =>
        wrap('SET', async () => {
          await c.set(key, value, { expiry: { type: TimeUnit.Milliseconds, count: pxMs } });
        }),
      set: (key, value) =>
        wrap('SET', async () => {
          await c.set(key, value);
        }),
      get: (key) => wrap('GET', async () => ((await c.get(key)) ?? null)?.toString() ?? null),
      claim: (key, value, pxMs) =>
        wrap('SET NX', async () => {
          const res = await c.set(key, value, {
            conditionalSet: 'onlyIfDoesNotExist',
            expiry: { type: TimeUnit.Milliseconds, count: pxMs },
          });
          return res !== null;
        }),
      del: (key) =>
        wrap('DEL', async () => {
          await c.del([key]);
        }),
      // Glide takes the message first.
      publish: (channel, message) => wrap('PUBLISH', () => c.publish(message, channel)),
    };
  }
  const c = raw.client as unknown as IoKv;
  return {
    setWithLease: (key, value, pxMs) =>
      wrap('SET', async () => {
        await c.set(key, value, 'PX', pxMs);
      }),
    set: (key, value) =>
      wrap('SET', async () => {
        await c.set(key, value);
      }),
    get: (key) => wrap('GET', () => c.get(key)),
    claim: (key, value, pxMs) =>
      wrap('SET NX', async () => (await c.set(key, value, 'PX', pxMs, 'NX')) !== null),
    del: (key) =>
      wrap('DEL', async () => {
        await c.del(key);
      }),
    publish: (channel, message) => wrap('PUBLISH', () => c.publish(channel, message)),
  };
}
