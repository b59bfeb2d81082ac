import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { configurationReference, referenceEntries } from '../../src/config/reference.js';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import { sluice } from '../helpers/cli.js';

/*
 * docs/CONFIGURATION.md is generated from the schema: stale or incomplete, it fails here.
 * `sluice config check` is what an operator runs before a restart: it must refuse what the
 * gateway refuses, and print what the gateway will use without printing a secret.
 */

const DOC = path.join(PROJECT_ROOT, 'docs', 'CONFIGURATION.md');
const dir = mkdtempSync(path.join(tmpdir(), 'sluice-config-check-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The environment without any SLUICE_* setting of the caller. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('SLUICE_')),
  );
  return { ...env, ...extra };
}

describe('configuration reference', { timeout: 30_000 }, () => {
  it('docs/CONFIGURATION.md is what `sluice config reference` generates now', () => {
    const checkedIn = readFileSync(DOC, 'utf8');
    assert.ok(
      checkedIn === configurationReference(),
      'docs/CONFIGURATION.md is stale: run `node dist/src/cli.js config reference -o docs/CONFIGURATION.md`',
    );
    const printed = sluice(['config', 'reference'], cleanEnv());
    assert.equal(printed.status, 0, printed.stderr);
    assert.equal(printed.stdout, checkedIn);
  });

  it('every key has a description, a type and a way to set it', () => {
    const entries = referenceEntries();
    assert.ok(entries.length > 100, `only ${entries.length} keys found`);
    const undocumented = entries.filter((e) => !e.description).map((e) => e.path);
    assert.deepEqual(undocumented, [], 'keys without .describe() text in src/config/schema.ts');
    for (const e of entries) {
      assert.ok(e.type && e.type !== 'any', `${e.path}: no type`);
      assert.ok(e.env.length > 0 && e.flags.length > 0, `${e.path}: no variable or flag`);
    }
  });

  it('names defaults, allowed values, variables and flags as the gateway reads them', () => {
    const doc = readFileSync(DOC, 'utf8');
    const section = (key: string) => doc.split(`### \`${key}\``)[1]!.split('\n### ')[0]!;
    assert.match(section('listen.port'), /default `8080`/);
    assert.match(section('listen.port'), /`SLUICE__listen__port`/);
    assert.match(section('listen.port'), /`--port`/);
    assert.match(section('quotas.onStoreFailure'), /one of `insure`, `open`, `closed`/);
    assert.match(section('admin.token'), /\*\*required\*\* · \*secret\*/);
    assert.match(section('admin.token'), /`SLUICE_ADMIN_TOKEN`/);
    assert.match(section('quotas.denyPaths'), /default `\["\/admin","\/stats","\/metrics"\]`/);
    assert.match(section('upstreams[].writeBudget.windowSec'), /default `1`/);
    assert.match(section('identity.forwardCredentials'), /default `\[\]`/);
  });
});

describe('sluice config check', { timeout: 60_000 }, () => {
  const token = 'a-token-of-my-own-0123456789abcdef';
  const plainKey = 'my-plain-api-key-value';
  const salt = 'my-secret-salt-value';

  it('prints the effective configuration with every secret masked', () => {
    const file = path.join(dir, 'ok.yaml');
    writeFileSync(
      file,
      [
        `admin: { token: ${token} }`,
        'upstreams: [{ id: relay-a, url: "http://user:relaypassword@127.0.0.1:7001" }]',
        `identity: { keySalt: ${salt} }`,
        'quotas:',
        '  tiers: { default: { write: { points: 10, windowSec: 60 } }, premium: { write: { points: 100, windowSec: 60 } } }',
        `  apiKeys: { ${plainKey}: premium, "sha256:${'ab'.repeat(32)}": premium }`,
        '  allowList: [203.0.113.7]',
      ].join('\n'),
    );
    const r = sluice(['config', 'check', file], cleanEnv({ SLUICE__quotas__mode: 'shadow' }));
    assert.equal(r.status, 0, r.stderr);
    for (const secret of [token, plainKey, salt, 'relaypassword', '203.0.113.7']) {
      assert.ok(!r.stdout.includes(secret), `printed a secret: ${secret}`);
    }
    assert.match(r.stdout, /valid/);
    const printed = parseYaml(r.stdout) as Record<string, Record<string, unknown>>;
    // The environment applies, and defaults are filled in.
    assert.equal(printed.quotas!.mode, 'shadow');
    assert.equal(printed.listen!.port, 8080);
    assert.equal(printed.admin!.token, `<secret: ${token.length} characters>`);
    assert.deepEqual(Object.values(printed.quotas!.apiKeys as object), ['premium', 'premium']);
    assert.ok(`sha256:${'ab'.repeat(32)}` in (printed.quotas!.apiKeys as object));
  });

  it('refuses an invalid file with the key at fault, exit status 1', () => {
    const file = path.join(dir, 'bad.yaml');
    writeFileSync(
      file,
      `admin: { token: ${token} }\nupstreams: [{ id: a, url: "http://127.0.0.1:1" }]\nquotas: { inMemoryBlok: true }\n`,
    );
    const r = sluice(['config', 'check', file], cleanEnv());
    assert.equal(r.status, 1);
    assert.match(r.stderr, /unknown key quotas\.inMemoryBlok: did you mean inMemoryBlock\?/);
    assert.equal(r.stdout, '');
  });

  it('the shipped example passes once given an admin token of its own', () => {
    const example = path.join(PROJECT_ROOT, 'examples', 'gateway.yaml');
    const r = sluice(['config', 'check', example], cleanEnv({ SLUICE_ADMIN_TOKEN: token }));
    assert.equal(r.status, 0, r.stderr);
    const refused = sluice(['config', 'check', example], cleanEnv());
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /admin\.token: is the placeholder/);
  });
});

/** The gateway refuses a typo at start (the schema side: test/unit/config/config.test.ts). */
describe('unknown configuration keys', { timeout: 60_000 }, () => {
  const minimal =
    'admin:\n  token: 0123456789abcdef\nupstreams:\n  - id: relay-a\n    url: http://127.0.0.1:7001\n';
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it('the gateway CLI refuses to start on a typo, naming it, with exit status 1', () => {
    const typo = file('cli-typo.yaml', minimal + 'quotas:\n  inMemoryBlok: false\n');
    const res = sluice(['gateway', '--config', typo], { ...process.env, SLUICE_ADMIN_TOKEN: '' });
    assert.equal(res.status, 1, res.stderr);
    assert.match(res.stderr, /unknown key quotas\.inMemoryBlok: did you mean inMemoryBlock\?/);
    assert.doesNotMatch(res.stdout, /gateway ready/);
  });
});
