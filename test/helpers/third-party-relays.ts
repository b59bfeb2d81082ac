/**
 * The third-party relays the tests run in front of, each with the reason its tests skip when
 * its cached build is missing (building takes minutes with cargo, a minute or two with go:
 * scripts/test.sh builds both in the background and runs these files last).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';
import { THIRD_PARTY_IMPLS } from '../../src/bench/run/config.js';
import type { ThirdPartyImpl } from '../../src/bench/run/config.js';
import type { RelayStartOptions, ThirdPartyRelay } from '../../src/bench/run/relay-process.js';
import { thirdPartyRelay } from '../../src/bench/run/third-party-relays.js';
import type { ThirdPartyRelayKind } from '../../src/bench/run/third-party-relays.js';
import { NostrClient, startGateway } from './gateway.js';
import type { GatewayUnderTest } from './gateway.js';
import { stopAll } from './processes.js';

const NEEDS: Record<ThirdPartyImpl, string> = {
  'nostr-rs-relay': 'cargo and protoc, several minutes',
  khatru: 'go 1.24 or later, a minute or two',
};

export interface RelayUnderSuite {
  impl: ThirdPartyImpl;
  kind: ThirdPartyRelayKind;
  /** False, or why its tests skip. */
  skip: string | false;
}

export function relayUnderSuite(impl: ThirdPartyImpl): RelayUnderSuite {
  const kind = thirdPartyRelay(impl);
  const binary = kind.binary();
  const skip = existsSync(binary)
    ? false
    : `${kind.label()} is not built (${binary} missing; build it with ` +
      `\`node dist/src/cli.js bench relay-install --relay-impl ${impl}\`: needs ${NEEDS[impl]})`;
  return { impl, kind, skip };
}

/** Every third-party relay, in the order of RELAY_IMPLS. */
export function relaysUnderSuite(): RelayUnderSuite[] {
  return THIRD_PARTY_IMPLS.map(relayUnderSuite);
}

/**
 * The relay (started with `relayOptions`) behind one gateway (iovalkey, standalone; health
 * checks on `/`; 100 writes a minute by default; `settings` on top), for the describe this is
 * called in: started before its tests; after them the clients it connected are closed, the
 * gateway and the relay stopped, and the relay's directory removed.
 */
export function relayBehindGateway(
  suite: RelayUnderSuite,
  settings: Record<string, unknown>,
  relayOptions: RelayStartOptions = {},
) {
  let relay: ThirdPartyRelay | undefined;
  let gw: GatewayUnderTest | undefined;
  let dir: string | undefined;
  const clients: NostrClient[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), `sluice-${suite.impl}-`));
    relay = await suite.kind.start(dir, () => undefined, process.env, relayOptions);
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      healthCheck: { path: '/', intervalMs: 500 },
      ...settings,
      quotas: {
        keyPrefix: `${suite.impl.replace(/-/g, '')}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
        tiers: { default: { write: { points: 100, windowSec: 60 } } },
        ...(settings.quotas as Record<string, unknown> | undefined),
      },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await stopAll(gw?.proc);
    await relay?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A client of `url` (from `from`, through X-Forwarded-For), closed after the tests. */
  const connect = async (url: string, from?: string) => {
    const client = await NostrClient.connect(url, from);
    clients.push(client);
    return client;
  };
  return {
    gw: () => gw!,
    relay: () => relay!,
    /** A client of the gateway, from `from`. */
    connect: (from: string) => connect(gw!.url, from),
    /** A client of the relay itself, past the gateway. */
    connectDirect: () => connect(relay!.url),
  };
}
