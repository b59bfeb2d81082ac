/**
 * The third-party relays the tests run in front of, each with the reason its tests skip when
 * its cached build is missing (building takes minutes with cargo, a minute or two with go:
 * scripts/test.sh builds both in the background and runs these files last).
 */
import { existsSync } from 'node:fs';
import { THIRD_PARTY_IMPLS } from '../../src/bench/run/config.js';
import type { ThirdPartyImpl } from '../../src/bench/run/config.js';
import { thirdPartyRelay } from '../../src/bench/run/third-party-relays.js';
import type { ThirdPartyRelayKind } from '../../src/bench/run/third-party-relays.js';

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
