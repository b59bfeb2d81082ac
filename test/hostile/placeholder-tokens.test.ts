/**
 * Attack: use an admin token copied from the repository. Every token the example and Docker
 * files ship is public, so the gateway must refuse to start with any of them. The files are
 * scanned for every token they ship, so a new placeholder cannot slip in unrefused.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { PLACEHOLDER_ADMIN_TOKENS } from '../../src/config/secrets.js';
import { PROJECT_ROOT } from '../../src/harness/paths.js';
import { sluice } from '../helpers/cli.js';

/** The shipped configuration: examples/*, the Compose files, everything under docker/. */
function shippedFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const full = path.join(dir, name);
      return statSync(full).isDirectory() ? walk(full) : [full];
    });
  const root = readdirSync(PROJECT_ROOT)
    .filter((name) => /^docker-compose.*\.ya?ml$/.test(name))
    .map((name) => path.join(PROJECT_ROOT, name));
  const examples = walk(path.join(PROJECT_ROOT, 'examples')).filter((f) =>
    /\.(ya?ml|json|sh)$/.test(f),
  );
  return [...examples, ...root, ...walk(path.join(PROJECT_ROOT, 'docker'))];
}

const TOKEN_VARIABLES = 'SLUICE_ADMIN_TOKEN|SLUICE__admin__token|SLUICE_RELAY_ADMIN_TOKEN';

/** Where a file can set an admin token to a literal, in any of the shipped formats. */
const TEXT_PATTERNS = [
  // NAME=value, NAME: value (but not the ${NAME:-default} form: the next pattern's).
  new RegExp(`(?<!\\$\\{)(?:${TOKEN_VARIABLES})["']?\\s*[=:]\\s*["']?([^\\s"'#}]+)`, 'g'),
  new RegExp(`\\$\\{(?:${TOKEN_VARIABLES}):?[-=?]([^}]+)\\}`, 'g'),
  /--admin-token[=\s]+["']?([^\s"',\]]+)/g,
  /^\s*["']?token["']?\s*:\s*["']?([^\s"'#,}]+)/gm,
  /admin\.token=["']?([^\s"']+)/g,
];

/** Literal values in a YAML or JSON document under a key named like an admin token. */
function structuredTokens(doc: unknown, key = ''): string[] {
  if (typeof doc === 'string') {
    return /^(token|SLUICE_ADMIN_TOKEN|SLUICE__admin__token|SLUICE_RELAY_ADMIN_TOKEN)$/.test(key)
      ? [doc]
      : [];
  }
  if (Array.isArray(doc)) {
    // A command as a list: the value after --admin-token.
    return doc.flatMap((item, i) =>
      doc[i - 1] === '--admin-token' && typeof item === 'string'
        ? [item]
        : structuredTokens(item, key),
    );
  }
  if (doc && typeof doc === 'object') {
    return Object.entries(doc).flatMap(([k, v]) => structuredTokens(v, k));
  }
  return [];
}

/** Every literal admin token the shipped files carry (variable references are not tokens). */
function shippedTokens(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const add = (token: string, file: string) => {
    const value = token.trim();
    if (!value || /^[$<]/.test(value)) return;
    found.set(value, [...(found.get(value) ?? []), path.relative(PROJECT_ROOT, file)]);
  };
  for (const file of shippedFiles()) {
    const text = readFileSync(file, 'utf8');
    for (const pattern of TEXT_PATTERNS) {
      for (const m of text.matchAll(pattern)) add(m[1]!, file);
    }
    if (/\.(ya?ml|json)$/.test(file)) {
      for (const token of structuredTokens(parseYaml(text, { merge: true }) as unknown)) {
        add(token, file);
      }
    }
  }
  return found;
}

const settings = (token: string) => ({
  admin: { token },
  upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001' }],
});

describe('admin tokens shipped in the repository', { timeout: 60_000 }, () => {
  it('finds the placeholders the example and Docker configurations ship', () => {
    const files = shippedTokens().get('change-me-to-a-long-random-string') ?? [];
    for (const file of ['examples/gateway.yaml', 'docker/config/gateway.yaml']) {
      assert.ok(files.includes(file), `the scan finds the placeholder of ${file}`);
    }
  });

  it('refuses each of them, naming the setting and not the token', () => {
    for (const [token, files] of shippedTokens()) {
      assert.ok(
        PLACEHOLDER_ADMIN_TOKENS.includes(token),
        `${files.join(', ')}: ships the admin token "${token}"; add it to PLACEHOLDER_ADMIN_TOKENS`,
      );
      for (const spelling of [token, ` ${token.toUpperCase()} `]) {
        assert.throws(
          () => validateGatewayConfig(settings(spelling)),
          (err: Error) => {
            assert.ok(err instanceof ConfigError);
            assert.match(err.message, /admin\.token: is the placeholder shipped/);
            assert.ok(!err.message.includes(token), `the error echoes the token: ${err.message}`);
            return true;
          },
          `${files.join(', ')}: "${token}" is accepted`,
        );
      }
    }
  });

  it('accepts a token of the operator’s own', () => {
    assert.equal(
      validateGatewayConfig(settings('an-operator-own-secret-4f9a')).admin.token.length,
      27,
    );
  });

  it('stops `sluice gateway --config examples/gateway.yaml` before it listens', () => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('SLUICE_ADMIN') && !k.startsWith('SLUICE__'),
      ),
    );
    const config = path.join(PROJECT_ROOT, 'examples', 'gateway.yaml');
    const result = sluice(['gateway', '--config', config], env, 30_000);
    assert.notEqual(result.status, 0, result.stdout);
    assert.doesNotMatch(result.stdout, /ready/);
    assert.match(result.stderr, /admin\.token: is the placeholder shipped/);
    assert.ok(!result.stderr.includes('change-me-to-a-long-random-string'), result.stderr);
  });
});
