/**
 * docs/CONFIGURATION.md, generated from the schema itself (`sluice config reference`): every
 * key with its type, default, allowed values, description and the variable and flag that set
 * it. The text comes from the schema's `.describe()` strings, so the reference cannot drift
 * from what the gateway accepts; test/integration/config-reference.test.ts fails when the checked-in file
 * is stale.
 */
import { z } from 'zod';
import { valueAt } from '../util/data.js';
import { ENV_ALIASES, PATH_FLAGS, envVarOf } from './load.js';
import { GatewayConfigSchema } from './schema.js';
import { SECRET_SETTINGS } from './secrets.js';

/** The parts of a JSON Schema (as zod writes it) this module reads. */
interface Json {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Json[];
  properties?: Record<string, Json>;
  required?: string[];
  additionalProperties?: Json | boolean;
  items?: Json;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  minLength?: number;
  pattern?: string;
  format?: string;
}

/** One documented key. */
export interface ReferenceEntry {
  /** Dotted, with `[]` for list items and `<name>` for map keys: upstreams[].url. */
  path: string;
  type: string;
  /** Shown as given in a file; undefined: required, or unset by default. */
  default?: string;
  required: boolean;
  description?: string;
  env: string[];
  flags: string[];
  /** A section: an object whose keys follow. */
  section: boolean;
  /** A section that is absent unless given (a tier's read quota, a node's write budget). */
  optional: boolean;
  secret: boolean;
}

/** The schema as JSON Schema of its input (what a file holds), definitions inlined. */
function jsonSchema(): Json {
  return z.toJSONSchema(GatewayConfigSchema, {
    io: 'input',
    unrepresentable: 'any',
    reused: 'inline',
  }) as Json;
}

/**
 * A configuration with only the required keys, validated: its values are the defaults the
 * gateway uses (zod writes no default into JSON Schema where a transform follows one).
 */
function defaultsConfig(): unknown {
  return GatewayConfigSchema.parse({
    admin: { token: 'x'.repeat(16) },
    upstreams: [{ id: 'a', url: 'http://127.0.0.1:1' }],
  });
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function bounds(s: Json): string {
  const lo =
    s.exclusiveMinimum !== undefined
      ? s.exclusiveMinimum === 0 && s.type === 'integer'
        ? 1
        : `> ${s.exclusiveMinimum}`
      : s.minimum;
  const hi =
    s.exclusiveMaximum !== undefined
      ? `< ${s.exclusiveMaximum}`
      : s.maximum !== undefined && s.maximum < MAX_SAFE
        ? s.maximum
        : undefined;
  if (lo === undefined && hi === undefined) return '';
  if (typeof lo === 'number' && typeof hi === 'number') return ` ${lo} to ${hi}`;
  if (typeof lo === 'string' && hi !== undefined) return ` ${lo}, ${hi}`;
  if (lo !== undefined) return typeof lo === 'number' ? ` >= ${lo}` : ` ${lo}`;
  return typeof hi === 'number' ? ` <= ${hi}` : ` ${hi}`;
}

/** A short human type: "integer >= 1", "one of `a`, `b`", "list of string". */
export function typeOf(s: Json): string {
  if (s.anyOf) return s.anyOf.map(typeOf).join(' or ');
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return `one of ${s.enum.map((v) => `\`${String(v)}\``).join(', ')}`;
  if (Array.isArray(s.type)) return s.type.join(' or ');
  switch (s.type) {
    case 'integer':
    case 'number':
      return `${s.type}${bounds(s)}`;
    case 'string':
      if (s.format === 'uri') return 'URL';
      if (s.format === 'starts_with') return 'path (starts with /)';
      if (s.pattern) return `string matching \`${s.pattern}\``;
      return s.minLength ? `string of ${s.minLength}+ characters` : 'string';
    case 'array': {
      const least = s.minItems ? `at least ${s.minItems}` : '';
      if (hasKeys(s.items)) return `list of objects (${least ? `${least}, ` : ''}keys below)`;
      return `list of ${s.items ? typeOf(s.items) : 'values'}${least ? ` (${least})` : ''}`;
    }
    case 'object':
      if (isMap(s)) {
        const value = s.additionalProperties as Json;
        return `map of name to ${hasKeys(value) ? 'object (keys below)' : typeOf(value)}`;
      }
      return 'section';
    case 'boolean':
      return 'true or false';
    default:
      return 'any';
  }
}

function isMap(s: Json): boolean {
  return (
    s.type === 'object' &&
    !s.properties &&
    typeof s.additionalProperties === 'object' &&
    s.additionalProperties !== null
  );
}

function hasKeys(s: Json | undefined): s is Json & { properties: Record<string, Json> } {
  return s?.type === 'object' && s.properties !== undefined;
}

/** Where a path can be set from: the variable and flags. */
function sourcesOf(path: string): { env: string[]; flags: string[] } {
  // Inside a list: the whole list is set at once (as JSON).
  const listAt = path.indexOf('[]');
  const settable = listAt >= 0 ? path.slice(0, listAt) : path;
  const env = [
    ...Object.entries(ENV_ALIASES)
      .filter(([, p]) => p === settable)
      .map(([name]) => name),
    envVarOf(settable),
  ];
  const flags = [...(PATH_FLAGS[settable] ? [PATH_FLAGS[settable]] : []), `--set ${settable}=...`];
  return { env, flags };
}

function isSecret(path: string): boolean {
  const plain = path.replace(/\.<name>/g, '').replace(/\[\]/g, '');
  return SECRET_SETTINGS.some((s) => plain === s || plain.startsWith(`${s}.`));
}

function show(value: unknown): string {
  return JSON.stringify(value);
}

/** Every key of the schema, in schema order, sections before their keys. */
export function referenceEntries(): ReferenceEntry[] {
  const defaults = defaultsConfig();
  const entries: ReferenceEntry[] = [];
  const visit = (s: Json, path: string, dataPath: string[] | undefined, required: boolean) => {
    const section = hasKeys(s);
    let shown: string | undefined;
    if (!section && !required) {
      const effective = dataPath ? valueAt(defaults, dataPath) : undefined;
      const value = effective !== undefined ? effective : s.default;
      if (value !== undefined) shown = show(value);
    }
    entries.push({
      path,
      type: typeOf(s),
      default: shown,
      required,
      description: s.description,
      ...sourcesOf(path),
      section,
      optional: section && !required && s.default === undefined,
      secret: isSecret(path),
    });
    const child = (key: string, schema: Json, req: boolean, segment?: string) =>
      visit(
        schema,
        `${path}${key}`,
        dataPath && segment !== undefined ? [...dataPath, segment] : undefined,
        req,
      );
    if (section) {
      for (const [key, schema] of Object.entries(s.properties)) {
        const req = (s.required ?? []).includes(key) && schema.default === undefined;
        child(`.${key}`, schema, req, key);
      }
    } else if (s.type === 'array' && hasKeys(s.items)) {
      for (const [key, schema] of Object.entries(s.items.properties)) {
        const req = (s.items.required ?? []).includes(key) && schema.default === undefined;
        child(`[].${key}`, schema, req);
      }
    } else if (isMap(s) && hasKeys(s.additionalProperties as Json)) {
      const value = s.additionalProperties as Json & { properties: Record<string, Json> };
      for (const [key, schema] of Object.entries(value.properties)) {
        const req = (value.required ?? []).includes(key) && schema.default === undefined;
        child(`.<name>.${key}`, schema, req);
      }
    }
  };
  const root = jsonSchema();
  for (const [key, schema] of Object.entries(root.properties ?? {})) {
    const req = (root.required ?? []).includes(key) && schema.default === undefined;
    visit(schema, key, [key], req);
  }
  // A nested key of a list item or map value: its path starts with a dot at the top.
  return entries.map((e) => ({ ...e, path: e.path.replace(/^\./, '') }));
}

const INTRO = `# Configuration reference

<!-- Generated by \`sluice config reference\` from src/config/schema.ts: do not edit by hand. -->

Every setting of \`sluice gateway\`, from the schema that validates it. Settings come from a
YAML or JSON file (\`--config FILE\`), then the environment, then flags; later sources win.

- **Environment**: \`SLUICE__<section>__<key>=value\` sets any key (\`SLUICE__quotas__mode=shadow\`);
  values are read as JSON when they parse (\`8080\`, \`true\`, \`["a:1","b:2"]\`), else as text.
  \`SLUICE_ADMIN_TOKEN\` and \`SLUICE_LOG_LEVEL\` are short forms.
- **Flags**: \`--set path=value\` sets any key (repeatable, same parsing); a few keys have their
  own flag, listed with them.
- A list (\`upstreams\`, \`quotas.routes\`) is set whole: its items' keys are set through it.
- Every section refuses keys it does not know: a typo is an error naming the key probably meant.
- \`sluice config check FILE\` validates a file with the environment and prints the effective
  configuration, secrets masked. Secret settings are marked *secret* below: errors and
  \`config check\` never print their values.
- Durations are in milliseconds (\`...Ms\`) or seconds (\`...Sec\`); sizes in bytes.

`;

function entryText(e: ReferenceEntry): string {
  const facts = [e.type];
  if (e.section)
    facts[0] = e.required ? 'required section' : e.optional ? 'optional section' : 'section';
  else if (e.required) facts.push('**required**');
  else if (e.default !== undefined) facts.push(`default \`${e.default}\``);
  else facts.push('unset by default');
  if (e.secret) facts.push('*secret*');
  const lines = [`### \`${e.path}\``, '', facts.join(' · ')];
  if (e.description) lines.push('', `${e.description}.`.replace(/\.\.$/, '.'));
  // A section's keys each name their own variable and flag.
  if (!e.section) {
    lines.push(
      '',
      `Environment: ${e.env.map((v) => `\`${v}\``).join(', ')}. ` +
        `Flag: ${e.flags.map((f) => `\`${f}\``).join(', ')}.`,
    );
  }
  return lines.join('\n');
}

/** The whole of docs/CONFIGURATION.md. */
export function configurationReference(): string {
  const entries = referenceEntries();
  const tops = entries.filter((e) => !e.path.includes('.') && !e.path.includes('['));
  const contents = tops.map((e) => `[\`${e.path}\`](#${anchor(e.path)})`).join(' · ');
  const body = entries.map((e) =>
    !e.path.includes('.') && !e.path.includes('[')
      ? `## \`${e.path}\`\n\n${entryText(e).split('\n').slice(2).join('\n')}`
      : entryText(e),
  );
  return `${INTRO}${contents}\n\n${body.join('\n\n')}\n`;
}

/** GitHub's heading anchor of a code-only heading. */
function anchor(path: string): string {
  return path.toLowerCase().replace(/[^a-z0-9_ -]/g, '');
}
