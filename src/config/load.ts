import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { setPath, valueAt } from '../util/data.js';
import { GatewayConfigSchema } from './schema.js';
import { settingLabel } from './secrets.js';
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
const ENV_ALIASES: Record<string, string> = {
  SLUICE_ADMIN_TOKEN: 'admin.token',
  SLUICE_LOG_LEVEL: 'logging.level',
};

/**
 * Read the file (YAML or JSON), apply the environment (SLUICE__section__key=value, values
 * parsed as JSON when they parse) and the flags, then validate once. Every problem is
 * reported with the key it concerns.
 */
export function loadGatewayConfig(sources: ConfigSources): GatewayConfig {
  const base = sources.file ? readConfigFile(sources.file) : {};
  const env = sources.env ?? process.env;
  const merged: Record<string, unknown> = structuredClone(base);
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === '') continue;
    if (ENV_ALIASES[name]) setPath(merged, ENV_ALIASES[name], parseScalar(value));
    else if (name.startsWith('SLUICE__')) {
      setPath(merged, name.slice('SLUICE__'.length).split('__').join('.'), parseScalar(value));
    }
  }
  for (const [path, value] of Object.entries(sources.overrides ?? {})) {
    if (value !== undefined) setPath(merged, path, value);
  }
  return validateGatewayConfig(merged, sources.file);
}

export function validateGatewayConfig(input: unknown, file?: string): GatewayConfig {
  const parsed = GatewayConfigSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const where = file ? ` (file ${file}, environment and flags)` : '';
  // Each problem names its setting and the value it got, except where either is a secret
  // (API keys, the admin token, the salt): errors end up in logs.
  const lines = parsed.error.issues.map((issue) => {
    const label = settingLabel(issue.path, input);
    const got = valueAt(input, issue.path);
    const shown =
      got === undefined || typeof got === 'object' || label.secret
        ? ''
        : ` (got ${JSON.stringify(got)})`;
    return `  ${label.path || '(top level)'}: ${issue.message}${shown}`;
  });
  throw new ConfigError(`invalid gateway configuration${where}:\n${lines.join('\n')}`);
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
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

/** "8080" -> 8080, "true" -> true, '["a"]' -> ["a"]; anything else stays a string. */
export function parseScalar(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
