import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { setPath, valueAt } from '../util/data.js';
import { GatewayConfigSchema } from './schema.js';
import { settingLabel } from './secrets.js';
import { suggestionFor } from './unknown-keys.js';
import type { GatewayConfig } from './schema.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Where settings come from; later sources win: file < environment < flags. */
export interface ConfigSources {
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Dotted paths from flags, e.g. { 'listen.port': 8080 }. */
  overrides?: Record<string, unknown>;
}

/** Environment variables with a fixed meaning, besides the generic SLUICE__a__b form. */
export const ENV_ALIASES: Readonly<Record<string, string>> = {
  SLUICE_ADMIN_TOKEN: 'admin.token',
  SLUICE_LOG_LEVEL: 'logging.level',
};

/**
 * Flags of `sluice gateway` that set one setting (src/cli/gateway.ts); `--set path=value`
 * sets any. Listed here for the configuration reference.
 */
export const PATH_FLAGS: Readonly<Record<string, string>> = {
  'listen.host': '--host',
  'listen.port': '--port',
  'admin.port': '--admin-port',
  'admin.token': '--admin-token',
  'valkey.client': '--valkey-client',
  'valkey.mode': '--valkey-mode',
  'valkey.nodes': '--valkey-nodes a:1,b:2',
  upstreams: '--upstream ID=URL (repeatable)',
  workers: '--workers',
};

/** The generic environment variable of a dotted path: SLUICE__quotas__mode. */
export function envVarOf(path: string): string {
  return `SLUICE__${path.split('.').join('__')}`;
}

/**
 * Read the file (YAML or JSON), apply the environment (SLUICE__section__key=value, values
 * parsed as JSON when they parse) and the flags, then validate once. Every problem is
 * reported with the key it concerns.
 */
export function loadGatewayConfig(sources: ConfigSources): GatewayConfig {
  const base = sources.file ? readConfigFile(sources.file) : {};
  const env = sources.env ?? process.env;
  const merged: Record<string, unknown> = structuredClone(base);
  // Dotted path -> the variable or flag that set it, for errors about keys set there.
  const origins = new Map<string, string>();
  const set = (path: string, value: unknown, origin: string) => {
    setPath(merged, path, value);
    origins.set(path, origin);
  };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === '') continue;
    if (ENV_ALIASES[name]) set(ENV_ALIASES[name], parseScalar(value), name);
    else if (name.startsWith('SLUICE__')) {
      set(pathOfEnvVar(name), parseScalar(value), name);
    }
  }
  for (const [path, value] of Object.entries(sources.overrides ?? {})) {
    if (value !== undefined) set(path, value, `--set ${path}`);
  }
  const config = validateGatewayConfig(merged, sources.file, origins);
  return sources.file ? withPathsFrom(path.dirname(sources.file), config) : config;
}

/** Files the configuration names, relative to its own directory (where the operator wrote it). */
function withPathsFrom(dir: string, config: GatewayConfig): GatewayConfig {
  const { pubkeyTiers } = config.identity;
  const resolved = Object.fromEntries(
    Object.entries(pubkeyTiers).map(([tier, file]) => [tier, path.resolve(dir, file)]),
  );
  return { ...config, identity: { ...config.identity, pubkeyTiers: resolved } };
}

/**
 * Validate settings; every problem names its key. `origins` maps dotted paths to the
 * environment variable or flag that set them, named in errors about keys under them.
 */
export function validateGatewayConfig(
  input: unknown,
  file?: string,
  origins: ReadonlyMap<string, string> = new Map(),
): GatewayConfig {
  const parsed = GatewayConfigSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const where = file ? ` (file ${file}, environment and flags)` : '';
  // Each problem names its setting and the value it got, except where either is a secret
  // (API keys, the admin token, the salt): errors end up in logs.
  const lines = parsed.error.issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => unknownKeyLine(input, [...issue.path, key], origins));
    }
    const label = settingLabel(issue.path, input);
    const got = valueAt(input, issue.path);
    const shown =
      got === undefined || typeof got === 'object' || label.secret
        ? ''
        : ` (got ${JSON.stringify(got)})`;
    return `  ${label.path || '(top level)'}: ${issue.message}${shown}`;
  });
  // The fix first, then one line per problem: the key, what is wrong, and what it got.
  const fix = file
    ? `fix the keys below (docs/CONFIGURATION.md; \`sluice config check ${file}\` checks without starting)`
    : 'fix the keys below (docs/CONFIGURATION.md)';
  throw new ConfigError(`invalid gateway configuration${where}: ${fix}\n${lines.join('\n')}`);
}

/**
 * "unknown key quotas.inMemoryBlok: did you mean inMemoryBlock?": a misspelt or misplaced key
 * would otherwise switch a setting off without a word.
 */
function unknownKeyLine(
  input: unknown,
  path: PropertyKey[],
  origins: ReadonlyMap<string, string>,
): string {
  const label = settingLabel(path, input).path;
  const key = String(path[path.length - 1]);
  const meant = suggestionFor(GatewayConfigSchema, path.slice(0, -1), key);
  const dotted = path.map(String).join('.');
  const origin = [...origins].find(([p]) => dotted === p || dotted.startsWith(`${p}.`))?.[1];
  return (
    `  unknown key ${label}` +
    (meant ? `: did you mean ${meant}?` : '') +
    (origin ? ` (from ${origin})` : '')
  );
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const reason =
      (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw new ConfigError(
      `cannot read config file ${file}: ${reason}; give --config the path of a readable YAML or JSON file`,
    );
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    // The parser's message quotes the offending lines, which may hold a secret: keep only
    // its first line (what is wrong, and where).
    const what = ((err as Error).message.split('\n')[0] ?? '').replace(/:$/, '');
    throw new ConfigError(`config file ${file} is not valid YAML or JSON: ${what}`);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new ConfigError(`config file ${file} must hold a mapping of settings at the top level`);
  }
  return data as Record<string, unknown>;
}

function pathOfEnvVar(name: string): string {
  return name.slice('SLUICE__'.length).split('__').join('.');
}

/** "8080" -> 8080, "true" -> true, '["a"]' -> ["a"]; anything else stays a string. */
export function parseScalar(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
