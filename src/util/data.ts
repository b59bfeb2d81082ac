/** Small helpers over plain data: paths into nested objects, schema-checked JSON. */

/** The value at a path inside nested objects, or undefined where the path leaves them. */
export function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Set a dotted path ("a.b.c"), creating objects on the way. */
export function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[keys[keys.length - 1]!] = value;
}

/** JSON text checked against a schema: the value, or undefined for anything else. */
export function decodeJson<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  text: string | null,
): T | undefined {
  if (!text) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
