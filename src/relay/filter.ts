/**
 * NIP-01 filters: parsing (from a REQ or from HTTP query parameters) and matching, as pure
 * functions. A stored event matches when every given condition holds; a REQ's filters are
 * OR-ed by the caller.
 */

export interface Filter {
  ids?: Set<string>;
  authors?: Set<string>;
  kinds?: Set<number>;
  since?: number;
  until?: number;
  limit?: number;
  /** `#e`, `#p`, ...: the tag letter and the values of which one must be present. */
  tags?: [string, Set<string>][];
}

/** The fields of an event that the index keeps, enough for everything but tag conditions. */
export interface EventMeta {
  id: string;
  pubkey: string;
  kind: number;
  created_at: number;
}

export class FilterError extends Error {
  override name = 'FilterError';
}

const HEX64 = /^[0-9a-f]{64}$/;
const TAG_KEY = /^#[a-zA-Z]$/;
const MAX_VALUES = 1000;

export function matchesMeta(filter: Filter, event: EventMeta): boolean {
  if (filter.ids && !filter.ids.has(event.id)) return false;
  if (filter.authors && !filter.authors.has(event.pubkey)) return false;
  if (filter.kinds && !filter.kinds.has(event.kind)) return false;
  if (filter.since !== undefined && event.created_at < filter.since) return false;
  if (filter.until !== undefined && event.created_at > filter.until) return false;
  return true;
}

export function matchesTags(filter: Filter, tags: string[][]): boolean {
  if (!filter.tags) return true;
  return filter.tags.every(([letter, values]) =>
    tags.some((tag) => tag[0] === letter && tag[1] !== undefined && values.has(tag[1])),
  );
}

export function matchesEvent(filter: Filter, event: EventMeta & { tags: string[][] }): boolean {
  return matchesMeta(filter, event) && matchesTags(filter, event.tags);
}

/** A filter object from a REQ frame. Throws FilterError naming the bad field. */
export function parseFilter(raw: unknown): Filter {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new FilterError('a filter must be a JSON object');
  }
  const filter: Filter = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    switch (key) {
      case 'ids':
      case 'authors':
        filter[key] = new Set(hexList(key, value));
        break;
      case 'kinds':
        filter.kinds = new Set(list(key, value).map((v) => integer(key, v, 0, 65535)));
        break;
      case 'since':
      case 'until':
        filter[key] = integer(key, value, 0, Number.MAX_SAFE_INTEGER);
        break;
      case 'limit':
        filter.limit = integer(key, value, 0, Number.MAX_SAFE_INTEGER);
        break;
      default:
        if (!TAG_KEY.test(key)) throw new FilterError(`unsupported filter field "${key}"`);
        (filter.tags ??= []).push([
          key.slice(1),
          new Set(
            list(key, value).map((v) => {
              if (typeof v !== 'string') throw new FilterError(`${key} values must be strings`);
              return v;
            }),
          ),
        ]);
    }
  }
  return filter;
}

/**
 * A filter from HTTP query parameters: comma-separated `ids`, `authors`, `kinds`, and
 * integers `since`, `until`, `limit`.
 */
export function filterFromQuery(query: Record<string, unknown>): Filter {
  const raw: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query)) {
    if (typeof value !== 'string') throw new FilterError(`give ${key} once`);
    const items = value === '' ? [] : value.split(',');
    switch (key) {
      case 'ids':
      case 'authors':
        raw[key] = items;
        break;
      case 'kinds':
        raw[key] = items.map((v) => numberParam(key, v));
        break;
      case 'since':
      case 'until':
      case 'limit':
        raw[key] = numberParam(key, value);
        break;
      default:
        throw new FilterError(
          `unsupported query parameter "${key}" (use ids, authors, kinds, since, until, limit)`,
        );
    }
  }
  return parseFilter(raw);
}

function list(key: string, value: unknown): unknown[] {
  if (!Array.isArray(value)) throw new FilterError(`${key} must be an array`);
  if (value.length > MAX_VALUES) throw new FilterError(`${key} has more than ${MAX_VALUES} values`);
  return value;
}

function hexList(key: string, value: unknown): string[] {
  return list(key, value).map((v) => {
    if (typeof v !== 'string' || !HEX64.test(v)) {
      throw new FilterError(`${key} must hold 64-character lowercase hex strings`);
    }
    return v;
  });
}

function integer(key: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new FilterError(`${key} must be an integer from ${min} to ${max}`);
  }
  return value;
}

function numberParam(key: string, value: string): number | string {
  // Leave non-numbers as strings so parseFilter reports them with the field's rule.
  return /^-?\d+$/.test(value.trim()) ? Number(value) : value;
}
