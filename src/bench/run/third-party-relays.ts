/**
 * The third-party relays the benchmark and the tests can run behind the gateway, by their
 * `--relay-impl` name: how each is built into the cache, where its binary is, how it starts.
 */
import type { ThirdPartyImpl } from './config.js';
import {
  ensureKhatruRelay,
  findGo,
  khatruBuildCommand,
  khatruRelayBinary,
  khatruVersion,
  startKhatruRelay,
} from './khatru-relay.js';
import type { RelayStartOptions, ThirdPartyRelay } from './relay-process.js';
import {
  NOSTR_RS_RELAY_VERSION,
  ensureNostrRsRelay,
  findCargo,
  installCommand,
  nostrRsRelayBinary,
  startNostrRsRelay,
} from './third-party-relay.js';

export interface ThirdPartyRelayKind {
  impl: ThirdPartyImpl;
  /** Its name and version, as a run's process is named (nodeId). */
  label(): string;
  binary(env?: NodeJS.ProcessEnv): string;
  /** The commands that build it, for a message. */
  buildCommand(env?: NodeJS.ProcessEnv): string;
  /** The cached binary, built first when missing. */
  ensure(log: (line: string) => void, env?: NodeJS.ProcessEnv): Promise<string>;
  start(
    workDir: string,
    log: (line: string) => void,
    env?: NodeJS.ProcessEnv,
    opts?: RelayStartOptions,
  ): Promise<ThirdPartyRelay>;
}

const KINDS: Record<ThirdPartyImpl, ThirdPartyRelayKind> = {
  'nostr-rs-relay': {
    impl: 'nostr-rs-relay',
    label: () => `nostr-rs-relay-${NOSTR_RS_RELAY_VERSION}`,
    binary: nostrRsRelayBinary,
    buildCommand: (env) => installCommand(findCargo(env) ?? 'cargo', env),
    ensure: ensureNostrRsRelay,
    start: startNostrRsRelay,
  },
  khatru: {
    impl: 'khatru',
    label: () => `khatru-${khatruVersion()}`,
    binary: khatruRelayBinary,
    buildCommand: (env) => khatruBuildCommand(findGo(env) ?? 'go', env),
    ensure: (log, env) => Promise.resolve(ensureKhatruRelay(log, env)),
    start: startKhatruRelay,
  },
};

export function thirdPartyRelay(impl: ThirdPartyImpl): ThirdPartyRelayKind {
  return KINDS[impl];
}
