/**
 * BIP-340 schnorr verifiers that could replace nostr-wasm, for `sluice bench verify`. None is a
 * dependency of sluice: each is loaded by name when installed (`npm i --no-save ...`) and
 * skipped, with the command that installs it, when not.
 *
 * Each is measured behind the gateway's own input checks and sha256 id check
 * (`eventIdMatches`), so a row differs from the gateway's only in the schnorr engine.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** (message, x-only pubkey, signature) -> valid; may throw on input it refuses. */
export type Schnorr = (message: Uint8Array, pubkey: Uint8Array, sig: Uint8Array) => boolean;

export interface SchnorrCandidate {
  /** The npm package. */
  name: string;
  /** The version measured; what would be pinned if it won. */
  version: string;
  engine: string;
  /** How it installs: a candidate must install from the registry without a compiler. */
  install: string;
  /** False for one measured only to show what a compiled build would give. */
  eligible: boolean;
  /** What is imported (by a name TypeScript cannot see, so that none has to be installed). */
  specifier: string;
  /** The verifier, from the imported module (an ES module namespace). */
  adapt(module: Record<string, unknown>): Schnorr | Promise<Schnorr>;
}

export async function loadCandidate(candidate: SchnorrCandidate): Promise<Schnorr> {
  return candidate.adapt((await import(candidate.specifier)) as Record<string, unknown>);
}

/** The installed version of a candidate, or undefined when it is not installed. */
export function installedVersion(candidate: SchnorrCandidate): string | undefined {
  let dir: string;
  try {
    dir = path.dirname(fileURLToPath(import.meta.resolve(candidate.specifier)));
  } catch {
    return undefined;
  }
  for (; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === candidate.name) return pkg.version;
    } catch {
      // no package.json here: keep climbing
    }
  }
  return undefined;
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

export const SCHNORR_CANDIDATES: SchnorrCandidate[] = [
  {
    name: 'tiny-secp256k1',
    version: '2.2.4',
    engine: 'libsecp256k1 via rust-secp256k1, in WebAssembly',
    install: 'no compiler (the .wasm ships in the package)',
    eligible: true,
    specifier: 'tiny-secp256k1',
    adapt: (tiny) => tiny.verifySchnorr as Schnorr,
  },
  {
    name: 'secp256k1-wasm',
    version: '2.0.0',
    engine: 'libsecp256k1 in WebAssembly (emscripten, hex-string API)',
    install: 'no compiler (the .wasm ships in the package)',
    eligible: true,
    specifier: 'secp256k1-wasm',
    async adapt(imported) {
      const module = imported.default as {
        calledRun?: boolean;
        onRuntimeInitialized?: () => void;
        schnorrsig_verify(sig: string, msg: string, pubkey: string): { success: boolean };
      };
      if (!module.calledRun) {
        await new Promise<void>((resolve) => (module.onRuntimeInitialized = resolve));
      }
      return (message, pubkey, sig) =>
        module.schnorrsig_verify(hex(sig), hex(message), hex(pubkey)).success;
    },
  },
  {
    name: '@noble/curves',
    version: '2.0.1',
    engine: 'pure JavaScript (what nostr-tools uses)',
    install: 'no compiler (JavaScript)',
    eligible: true,
    specifier: '@noble/curves/secp256k1.js',
    adapt(imported) {
      const { schnorr } = imported as {
        schnorr: { verify(sig: Uint8Array, message: Uint8Array, pubkey: Uint8Array): boolean };
      };
      return (message, pubkey, sig) => schnorr.verify(sig, message, pubkey);
    },
  },
  {
    name: 'bcrypto',
    version: '5.5.2',
    engine: 'native C (libtorsion) through an N-API addon',
    install: 'compiles at install (node-gyp rebuild): needs a C compiler, so not eligible',
    eligible: false,
    specifier: 'bcrypto/lib/schnorr.js',
    adapt(imported) {
      const bcrypto = imported.default as {
        native?: number;
        verify(message: Uint8Array, sig: Uint8Array, pubkey: Uint8Array): boolean;
      };
      // Without its addon bcrypto silently runs a JavaScript fallback: measure only the native.
      if (bcrypto.native !== 2) throw new Error('bcrypto is installed without its native addon');
      return (message, pubkey, sig) => bcrypto.verify(message, sig, pubkey);
    },
  },
];

/** The command that installs every candidate for a measurement, without saving any. */
export function installCommand(): string {
  return `npm i --no-save ${SCHNORR_CANDIDATES.map((c) => `${c.name}@${c.version}`).join(' ')}`;
}
