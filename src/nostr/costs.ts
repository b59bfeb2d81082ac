/**
 * What one EVENT costs in write points: by its kind (single kinds and ranges), plus points per
 * KiB of the message above a free size, lowered for proof of work (see pow.ts). Pure
 * maths over the configuration: the admission step feeds it what it already parsed.
 */

/** Highest event kind NIP-01 allows. */
export const MAX_KIND = 65535;

export interface KindRange {
  lo: number;
  hi: number;
}

/** "7" or "30000-39999" (inclusive), or a bare number; undefined when not well-formed. */
export function parseKindSpec(spec: string | number): KindRange | undefined {
  const match = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(String(spec).trim());
  if (!match) return undefined;
  const lo = Number(match[1]);
  const hi = match[2] === undefined ? lo : Number(match[2]);
  return lo <= hi && hi <= MAX_KIND ? { lo, hi } : undefined;
}

/** Why a kind spec is refused (for the configuration's error), or undefined. */
export function kindSpecProblem(spec: string | number): string | undefined {
  return parseKindSpec(spec)
    ? undefined
    : `"${spec}" is not a kind (0-${MAX_KIND}) or an inclusive range "lo-hi" with lo <= hi`;
}

/** The first pair of ranges (as written) that share a kind, or undefined. */
export function overlappingRanges(specs: readonly string[]): [string, string] | undefined {
  const ranges = specs
    .map((spec) => ({ spec, range: parseKindSpec(spec) }))
    .filter((r): r is { spec: string; range: KindRange } => !!r.range && r.range.lo !== r.range.hi)
    .sort((a, b) => a.range.lo - b.range.lo);
  for (let i = 1; i < ranges.length; i++) {
    if (ranges[i]!.range.lo <= ranges[i - 1]!.range.hi)
      return [ranges[i - 1]!.spec, ranges[i]!.spec];
  }
  return undefined;
}

export interface CostSettings {
  /** Kind or "lo-hi" -> points; a single kind wins over a range that holds it. */
  kinds: Record<string, number>;
  /** Points of a kind not named. */
  default: number;
  /** Points per KiB (started) of the EVENT message above `freeBytes`. */
  perKiB?: { points: number; freeBytes: number };
}

/** The settings compiled for lookups: single kinds in a map, ranges sorted. */
export interface CostTable {
  single: Map<number, number>;
  ranges: { lo: number; hi: number; points: number }[];
  default: number;
  perKiB?: { points: number; freeBytes: number };
}

/** Compile validated settings (the schema refuses malformed and overlapping specs). */
export function compileCosts(settings: CostSettings): CostTable {
  const single = new Map<number, number>();
  const ranges: CostTable['ranges'] = [];
  for (const [spec, points] of Object.entries(settings.kinds)) {
    const range = parseKindSpec(spec);
    if (!range) throw new RangeError(kindSpecProblem(spec));
    if (range.lo === range.hi) single.set(range.lo, points);
    else ranges.push({ ...range, points });
  }
  ranges.sort((a, b) => a.lo - b.lo);
  return { single, ranges, default: settings.default, perKiB: settings.perKiB };
}

/** Points of a kind: its own entry, else the range holding it, else the default. */
export function kindPoints(table: CostTable, kind: number): number {
  const own = table.single.get(kind);
  if (own !== undefined) return own;
  // A handful of ranges at most: a scan is cheaper than anything cleverer.
  for (const r of table.ranges) if (kind >= r.lo && kind <= r.hi) return r.points;
  return table.default;
}

/**
 * Points of an EVENT message of `bytes` bytes with this kind. A kind that costs 0 stays free
 * whatever its size (ephemeral kinds an operator chose not to charge).
 */
export function eventCost(table: CostTable, kind: number, bytes: number): number {
  const points = kindPoints(table, kind);
  if (points === 0 || !table.perKiB) return points;
  const over = bytes - table.perKiB.freeBytes;
  return over > 0 ? points + Math.ceil(over / 1024) * table.perKiB.points : points;
}

/** A set of kinds from specs ("4", "1000-1999"): for nostr.blockedKinds. */
export function kindMatcher(specs: readonly (string | number)[]): (kind: number) => boolean {
  const ranges = specs.map(parseKindSpec).filter((r): r is KindRange => r !== undefined);
  if (ranges.length === 0) return () => false;
  return (kind) => ranges.some((r) => kind >= r.lo && kind <= r.hi);
}
