/**
 * Unknown configuration keys, named with the key probably meant. Every object of the gateway
 * schema is strict (test/unit/config/config.test.ts checks it), so zod reports each unknown key; this
 * module finds, by walking the schema along the key's path, the keys that were possible there.
 */
import type { z } from 'zod';

/** The parts of zod's internal definition this walk reads. */
interface Def {
  type: string;
  shape?: Record<string, Schema>;
  catchall?: Schema;
  innerType?: Schema;
  valueType?: Schema;
  element?: Schema;
  in?: Schema;
  out?: Schema;
  options?: Schema[];
}
type Schema = z.ZodType;

function defOf(schema: Schema): Def {
  return schema._zod.def;
}

/** Wrappers that hold one schema (defaults, optional, a preprocess before its object). */
function unwrap(schema: Schema): Schema {
  for (let s = schema, depth = 0; depth < 16; depth++) {
    const def = defOf(s);
    if (def.innerType) s = def.innerType;
    else if (def.type === 'pipe' && def.in && def.out)
      s = defOf(def.in).type === 'transform' ? def.out : def.in;
    else return s;
  }
  return schema;
}

/** The object schema at a path of the input (map keys and array indexes pass through). */
function objectAt(schema: Schema, path: readonly PropertyKey[]): Schema | undefined {
  let s = unwrap(schema);
  for (const segment of path) {
    const def = defOf(s);
    const next =
      def.type === 'object'
        ? def.shape?.[String(segment)]
        : def.type === 'record'
          ? def.valueType
          : def.type === 'array'
            ? def.element
            : undefined;
    if (!next) return undefined;
    s = unwrap(next);
  }
  return defOf(s).type === 'object' ? s : undefined;
}

/** The keys an object of the schema at `path` accepts. */
export function knownKeysAt(schema: Schema, path: readonly PropertyKey[]): string[] {
  const object = objectAt(schema, path);
  return object ? Object.keys(defOf(object).shape ?? {}) : [];
}

/** An object of the schema: its dotted path ('' at the top, "*" for map values and items). */
export interface SchemaObject {
  path: string;
  keys: string[];
  /** Refuses keys it does not know (zod's strictObject). */
  strict: boolean;
}

/** Every object in the schema, outermost first. */
export function objectsOf(schema: Schema, path = ''): SchemaObject[] {
  const def = defOf(unwrap(schema));
  const below = (child: Schema, segment: string) =>
    objectsOf(child, path ? `${path}.${segment}` : segment);
  if (def.type === 'object') {
    const strict = def.catchall !== undefined && defOf(def.catchall).type === 'never';
    const shape = def.shape ?? {};
    const children = Object.entries(shape).flatMap(([k, v]) => below(v, k));
    return [{ path, keys: Object.keys(shape), strict }, ...children];
  }
  if (def.type === 'record' && def.valueType) return below(def.valueType, '*');
  if (def.type === 'array' && def.element) return below(def.element, '*');
  if (def.type === 'union') return (def.options ?? []).flatMap((o) => objectsOf(o, path));
  return [];
}

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        rows[0]!.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      }
      rows[i]!.push(best);
    }
  }
  return rows[a.length]![b.length]!;
}

/**
 * The candidate closest to `key`, ignoring case, when close enough to be a slip (one edit in
 * a short key, two in most, three in long ones); undefined otherwise.
 */
export function closestKey(key: string, candidates: readonly string[]): string | undefined {
  const allowed = key.length <= 4 ? 1 : key.length <= 12 ? 2 : 3;
  let best: { key: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance <= allowed && (!best || distance < best.distance)) {
      best = { key: candidate, distance };
    }
  }
  return best?.key;
}

/**
 * What to suggest for an unknown `key` in the object at `path`: a close sibling, else the
 * same key in another section (a setting put in the wrong place).
 */
export function suggestionFor(
  schema: Schema,
  path: readonly PropertyKey[],
  key: string,
): string | undefined {
  const sibling = closestKey(key, knownKeysAt(schema, path));
  if (sibling) return sibling;
  const lower = key.toLowerCase();
  for (const object of objectsOf(schema)) {
    const match = object.keys.find((k) => k.toLowerCase() === lower);
    if (match && object.path && !object.path.includes('*')) return `${object.path}.${match}`;
  }
  return undefined;
}
