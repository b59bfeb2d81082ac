/**
 * What the hostile tests of the hash path (issue 32) share: a gateway's settings with the
 * `pubkey` identity and no leases (Valkey's count is then a client's whole charge), a victim
 * that signs, forgeries in its name, and a raw socket that sends one EVENT.
 */
import { after, before } from 'node:test';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import type { GatewayUnderTest } from './gateway.js';
import { HoldingProxy } from './holding-proxy.js';
import { startRelay } from './processes.js';
import type { RelayProcess } from './processes.js';
import { RawNostr } from './raw-nostr.js';

/**
 * Authors by pubkey, senders by address, `limit` writes a minute each, no leases (or, with
 * `leases`, the shipped leases and their credit for a first write: one gateway process alone
 * takes exactly what a credited write spends, so Valkey's count is still the charge).
 */
export function pubkeyQuotas(
  keyPrefix: string,
  limit: number,
  nostr: Record<string, unknown> = {},
  leases = false,
): Record<string, unknown> {
  return {
    identity: { order: ['pubkey', 'ip'] },
    quotas: {
      keyPrefix,
      lease: { enabled: leases },
      tiers: { default: { write: { points: limit, windowSec: 60 } } },
    },
    nostr,
  };
}

/** A fresh key: its pubkey, and a kind-1 note of `content` signed now. */
export function victimKeys(): { pk: string; event: (content: string) => Event } {
  const sk = generateSecretKey();
  return {
    pk: getPublicKey(sk),
    event: (content) =>
      finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content }, sk),
  };
}

/** `n` events in a victim's name, each with another key's signature: the ids are right. */
export function forgeriesOf(event: (content: string) => Event, n: number): Event[] {
  const other = finalizeEvent(
    { kind: 1, created_at: 1, tags: [], content: 'x' },
    generateSecretKey(),
  );
  return Array.from({ length: n }, (_, i) => ({ ...event(`forged ${i}`), sig: other.sig }));
}

/** Whether the connection has been answered OK (true or false) for `id`. */
export function answered(c: RawNostr, id: string): boolean {
  return c.received.some((m) => m[0] === 'OK' && m[1] === id);
}

/** A raw connection from `from`, kept in `sockets` (closed after), with `event` sent on it. */
export async function sendFrom(
  gw: GatewayUnderTest,
  from: string,
  event: Event,
  sockets: RawNostr[],
): Promise<RawNostr> {
  const socket = await RawNostr.open(gw.url, from);
  sockets.push(socket);
  socket.send(['EVENT', event]);
  return socket;
}

/**
 * A reference relay (node id relay-a) behind a HoldingProxy, and the raw sockets a test
 * opens, for the enclosing suite: started before its first test; the sockets, the proxy and
 * the relay closed after its last.
 */
export function suiteRelayBehindProxy(): {
  relay(): RelayProcess;
  proxy(): HoldingProxy;
  sockets: RawNostr[];
} {
  let relay: RelayProcess | undefined;
  let proxy: HoldingProxy | undefined;
  const sockets: RawNostr[] = [];
  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    proxy = await HoldingProxy.start(relay.url);
  });
  after(async () => {
    for (const s of sockets) s.close();
    await proxy?.close();
    await relay?.stop();
  });
  const started = <T>(what: T | undefined): T => {
    if (!what) throw new Error('the relay and proxy are not started yet');
    return what;
  };
  return { relay: () => started(relay), proxy: () => started(proxy), sockets };
}
