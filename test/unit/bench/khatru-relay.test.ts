/**
 * The khatru relay's cache key and build command, in process (the build and the relay
 * themselves run in test/integration/relay-impl.test.ts): the version is go.mod's, the key
 * changes with the source, and the command builds without cgo into the cache.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  KHATRU_SOURCE,
  khatruBuildCommand,
  khatruRelayBinary,
  khatruSourceHash,
  khatruVersion,
} from '../../../src/bench/run/khatru-relay.js';

describe('the khatru relay', { timeout: 10_000 }, () => {
  it("takes khatru's version from go.mod", () => {
    assert.match(khatruVersion(), /^v\d+\.\d+\.\d+$/);
  });

  it('is cached under its version and the hash of its source, which a change moves', () => {
    const env = { SLUICE_RELAY_CACHE: '/cache' };
    const binary = khatruRelayBinary(env);
    assert.equal(binary, `/cache/khatru-${khatruVersion()}-${khatruSourceHash()}/khatru-relay`);
    assert.match(khatruSourceHash(), /^[0-9a-f]{12}$/);
    const copy = mkdtempSync(path.join(os.tmpdir(), 'sluice-khatru-src-'));
    try {
      cpSync(KHATRU_SOURCE, copy, { recursive: true });
      assert.equal(khatruSourceHash(copy), khatruSourceHash());
      writeFileSync(path.join(copy, 'main.go'), '// changed\n', { flag: 'a' });
      assert.notEqual(khatruSourceHash(copy), khatruSourceHash());
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('builds without cgo, from the pinned modules, into the cache', () => {
    const command = khatruBuildCommand('go', { SLUICE_RELAY_CACHE: '/cache' });
    assert.match(command, /CGO_ENABLED=0 go build -mod=readonly -trimpath -o \/cache\/khatru-/);
    assert.ok(command.startsWith(`cd ${KHATRU_SOURCE} && `));
  });
});
