/**
 * NIP-42 through the gateway in front of nostr-rs-relay 0.8, which sends a challenge and never
 * answers the client's AUTH with OK: the gateway binds the pubkey on its own checks, and the
 * `auth` identity is charged (beside the address) for the connection's writes. Skipped, with
 * the reason, where the relay is not built.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { makeAuthEvent } from 'nostr-tools/nip42';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import {
  NOSTR_RS_RELAY_VERSION,
  nostrRsRelayBinary,
  startNostrRsRelay,
} from '../src/bench/run/third-party-relay.js';
import type { ThirdPartyRelay } from '../src/bench/run/third-party-relay.js';
import { NostrClient, startGateway, writesConsumed } from './helpers/gateway.js';
import type { GatewayUnderTest } from './helpers/gateway.js';
import { signedEvent } from './helpers/nostr-events.js';
import { stopAll } from './helpers/processes.js';

const PUBLIC_URL = 'wss://relay.example.test/';
const NRR = nostrRsRelayBinary();
const SKIP = existsSync(NRR)
  ? false
  : `nostr-rs-relay ${NOSTR_RS_RELAY_VERSION} is not built (${NRR} missing; ` +
    'build it with `sluice bench relay-install`, several minutes)';

describe('AUTH in front of nostr-rs-relay', { timeout: 120_000, skip: SKIP }, () => {
  let relay: ThirdPartyRelay | undefined;
  let gw: GatewayUnderTest | undefined;
  const clients: NostrClient[] = [];

  before(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-nrr-auth-'));
    relay = await startNostrRsRelay(dir, () => undefined, process.env, {
      auth: { relayUrl: PUBLIC_URL },
    });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      healthCheck: { path: '/', intervalMs: 500 },
      identity: { order: ['auth', 'ip'] },
      nostr: { publicUrl: PUBLIC_URL },
      quotas: {
        keyPrefix: `nrrauth${Date.now().toString(36)}`,
        tiers: { default: { write: { points: 100, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await stopAll(gw?.proc);
    await relay?.stop();
  });

  it('binds the pubkey of a checked AUTH the relay never answers', async () => {
    const client = await NostrClient.connect(gw!.url, '127.0.21.20');
    clients.push(client);
    await client.until((m) => m.some((x) => x[0] === 'AUTH'));
    const challenge = String(client.received.find((x) => x[0] === 'AUTH')![1]);
    const sk = generateSecretKey();
    client.send(['AUTH', finalizeEvent(makeAuthEvent(PUBLIC_URL, challenge), sk)]);
    const write = signedEvent(1, 'after AUTH, in front of nostr-rs-relay');
    const ok = await client.okFor(write.id, ['EVENT', write]);
    assert.equal(ok[2], true, JSON.stringify(ok));
    assert.equal(await writesConsumed(gw!, `auth:${getPublicKey(sk)}`), 1, 'the key is charged');
    assert.equal(await writesConsumed(gw!, 'ip:127.0.21.20'), 1, 'and the address beside it');
  });
});
