import type { GatewayConfig } from './schema.js';

/**
 * Admin tokens shipped as placeholders in examples/ and the Docker files. Anyone who has read
 * this repository knows them, so the gateway refuses to start with one. The test
 * test/hostile/placeholder-tokens.test.ts scans those files: a placeholder added there must be
 * added here.
 */
export const PLACEHOLDER_ADMIN_TOKENS: readonly string[] = ['change-me-to-a-long-random-string'];

export function isPlaceholderAdminToken(token: string): boolean {
  const given = token.trim().toLowerCase();
  return PLACEHOLDER_ADMIN_TOKENS.some((p) => p.toLowerCase() === given);
}

/** The identity salt used when none is set: public, so identity hashes can be precomputed. */
export const DEFAULT_KEY_SALT = 'sluice-v1';

/** The warning to log once at start, when the configuration keeps the public default salt. */
export function defaultSaltWarning(config: GatewayConfig): string | undefined {
  if (config.identity.keySalt !== DEFAULT_KEY_SALT) return undefined;
  return (
    'identity.keySalt is the public default: anyone can compute the Valkey keys of an IP, ' +
    'pubkey or API key; set identity.keySalt (or SLUICE__identity__keySalt) to a secret ' +
    'string, the same on every gateway sharing the quotas'
  );
}

/** Settings whose values are secret: an error names the setting, never its value. */
const SECRET_VALUES = ['admin.token', 'identity.keySalt', 'quotas.allowList'];
/** Maps whose keys are secret (plain API keys): an error names an entry by its position. */
const SECRET_KEYS = ['quotas.apiKeys'];
/** Every setting holding a secret, for the reference and `sluice config check`. */
export const SECRET_SETTINGS: readonly string[] = [...SECRET_VALUES, ...SECRET_KEYS];

/**
 * The configuration as `sluice config check` prints it: the admin token, a salt of one's
 * own, allow-listed identities, plain API keys and passwords in upstream URLs replaced by
 * placeholders that say what was there. Hashed keys (sha256:...) and the public default salt
 * are not secrets and stay.
 */
export function maskSecrets(config: GatewayConfig): GatewayConfig {
  const masked = structuredClone(config);
  masked.admin.token = `<secret: ${config.admin.token.length} characters>`;
  if (config.identity.keySalt !== DEFAULT_KEY_SALT) masked.identity.keySalt = '<secret>';
  masked.quotas.allowList = config.quotas.allowList.map((_, i) => `<allowed identity #${i + 1}>`);
  masked.quotas.apiKeys = Object.fromEntries(
    Object.entries(config.quotas.apiKeys).map(([key, tier], i) => [
      key.startsWith('sha256:') ? key : `<key #${i + 1}>`,
      tier,
    ]),
  );
  masked.upstreams = config.upstreams.map((u) => {
    const url = new URL(u.url);
    if (!url.password && !url.username) return u;
    url.username = url.username ? '<user>' : '';
    url.password = url.password ? '<secret>' : '';
    return { ...u, url: url.toString() };
  });
  return masked;
}

export interface SettingLabel {
  /** The dotted path, with secret map keys replaced by "<key #N>". */
  path: string;
  /** Whether the value at this path must not be shown. */
  secret: boolean;
}

/**
 * How an error may name the setting at `path` of `input` (the unvalidated settings): a plain
 * API key becomes its position, and values of secret settings are marked as not to be shown.
 */
export function settingLabel(path: readonly PropertyKey[], input: unknown): SettingLabel {
  const shown: string[] = [];
  let node: unknown = input;
  for (const segment of path) {
    const name = String(segment);
    const parent = shown.join('.');
    if (SECRET_KEYS.includes(parent) && !name.startsWith('sha256:')) {
      const keys = isRecord(node) ? Object.keys(node) : [];
      shown.push(`<key #${keys.indexOf(name) + 1}>`);
    } else {
      shown.push(name);
    }
    node = isRecord(node) ? node[name] : undefined;
  }
  const dotted = shown.join('.');
  // A scalar where a section holding a secret belongs (`admin: <token>`) is hidden too.
  const secret = [...SECRET_VALUES, ...SECRET_KEYS].some(
    (s) => dotted === s || dotted.startsWith(`${s}.`) || s.startsWith(`${dotted}.`),
  );
  return { path: dotted, secret };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
