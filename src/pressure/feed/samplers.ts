import { constants } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';

/** One memory reading, in bytes: the signal the control law divides by its target. */
export interface MemorySample {
  /** Memory that pressure is judged on (RSS without file-backed pages, or cgroup use less inactive files). */
  bytes: number;
  /** Everything the source reported, for logs and metrics. */
  detail: Record<string, number>;
}

export interface Sampler {
  readonly description: string;
  sample(): Promise<MemorySample>;
}

export class SamplerError extends Error {
  override name = 'SamplerError';
}

/** "VmRSS:   1234 kB" lines of /proc/<pid>/status, in bytes. */
export function parseProcStatus(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+) kB$/.exec(line.trim());
    if (m) out[m[1]!] = Number(m[2]) * 1024;
  }
  return out;
}

/** "key value" lines (cgroup memory.stat), as numbers. */
export function parseKeyValues(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined && /^\d+$/.test(value)) out[key] = Number(value);
  }
  return out;
}

/** "some avg10=0.12 avg60=..." of memory.pressure: the share of time stalled on memory. */
export function parsePressure(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const [kind, ...fields] = line.trim().split(/\s+/);
    for (const field of fields) {
      const [k, v] = field.split('=');
      if (kind && k && v !== undefined) out[`${kind}_${k}`] = Number(v);
    }
  }
  return out;
}

/**
 * The value of one metric in Prometheus text format: the first sample whose name matches
 * and, when given, whose label set is exactly `labels` (e.g. '{to="emergency"}').
 * Undefined when there is none.
 */
export function parsePrometheusValue(
  text: string,
  metric: string,
  labels?: string,
): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && m[1] === metric && (labels === undefined || m[2] === labels)) {
      const value = Number(m[3]);
      return Number.isFinite(value) ? value : undefined;
    }
  }
  return undefined;
}

/** A process's memory: RssAnon (+ RssShmem) from /proc/<pid>/status: RSS without file-backed pages. */
export function processSampler(pid: number): Sampler {
  const file = `/proc/${pid}/status`;
  return {
    description: `process ${pid} (${file})`,
    async sample() {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        throw new SamplerError(`cannot read ${file}: ${(err as Error).message}`);
      }
      const status = parseProcStatus(text);
      if (status.RssAnon === undefined) throw new SamplerError(`${file} has no RssAnon line`);
      return {
        bytes: status.RssAnon + (status.RssShmem ?? 0),
        detail: { rss: status.VmRSS ?? 0, rssAnon: status.RssAnon, rssFile: status.RssFile ?? 0 },
      };
    },
  };
}

/**
 * cgroup v1 writes "no limit" as the largest page-aligned long (9223372036854771712); any
 * limit from 1 EiB up is read as none.
 */
const NO_LIMIT_FROM = 2 ** 60;

/** A limit file's text as bytes: Infinity for none ('max' in v2, the huge value in v1). */
export function parseLimit(text: string): number {
  const t = text.trim();
  if (t === 'max') return Infinity;
  const n = Number(t);
  if (!/^\d+$/.test(t)) throw new SamplerError(`"${t}" is not a memory limit`);
  return n >= NO_LIMIT_FROM ? Infinity : n;
}

export type CgroupVersion = 1 | 2;

/** Which cgroup version `dir` is, from the memory files it holds (never from the mount). */
export async function detectCgroupVersion(dir: string): Promise<CgroupVersion> {
  const has = async (name: string) => {
    try {
      await access(path.join(dir, name), constants.R_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (await has('memory.current')) return 2;
  if (await has('memory.usage_in_bytes')) return 1;
  try {
    await access(dir, constants.R_OK);
  } catch (err) {
    throw new SamplerError(`cannot read ${dir}: ${(err as Error).message}`);
  }
  const hint = (await has('cgroup.controllers'))
    ? 'a cgroup v2 group without the memory controller: enable it with "+memory" in its parent\'s cgroup.subtree_control'
    : 'give a group of the memory hierarchy (e.g. /sys/fs/cgroup/memory/<group> on v1)';
  throw new SamplerError(
    `${dir} has neither memory.current (cgroup v2) nor memory.usage_in_bytes (cgroup v1): ${hint}`,
  );
}

/**
 * A memory cgroup of either version, detected from its files on the first sample:
 * v2 memory.current less inactive_file (memory.stat), v1 memory.usage_in_bytes less
 * total_inactive_file (the working set, as the kernel reclaims inactive file pages before
 * it kills). The detail carries `limit` (Infinity for none; v1 the smaller of the group's
 * own and the hierarchical limit), `oomKill` and, on v1, `failcnt`; on v2 PSI when present.
 */
export function cgroupSampler(dir: string): Sampler {
  const read = async (name: string) => {
    try {
      return await readFile(path.join(dir, name), 'utf8');
    } catch (err) {
      throw new SamplerError(`cannot read ${path.join(dir, name)}: ${(err as Error).message}`);
    }
  };
  /** Optional files (counters, PSI): a kernel without them still gives a usable reading. */
  const readOptional = async (name: string) => {
    try {
      return await readFile(path.join(dir, name), 'utf8');
    } catch {
      return undefined;
    }
  };
  const number = (name: string, text: string) => {
    const n = Number(text.trim());
    if (!/^\d+$/.test(text.trim())) throw new SamplerError(`${path.join(dir, name)}: not a number`);
    return n;
  };
  let version: CgroupVersion | undefined;

  const v2 = async (): Promise<MemorySample> => {
    const usage = number('memory.current', await read('memory.current'));
    const stat = parseKeyValues(await read('memory.stat'));
    const detail: Record<string, number> = {
      version: 2,
      usage,
      inactiveFile: stat.inactive_file ?? 0,
      limit: parseLimit(await read('memory.max')),
    };
    const events = await readOptional('memory.events');
    if (events !== undefined) detail.oomKill = parseKeyValues(events).oom_kill ?? 0;
    const psi = await readOptional('memory.pressure');
    if (psi !== undefined) Object.assign(detail, parsePressure(psi));
    return { bytes: Math.max(0, usage - detail.inactiveFile!), detail };
  };

  const v1 = async (): Promise<MemorySample> => {
    const usage = number('memory.usage_in_bytes', await read('memory.usage_in_bytes'));
    const stat = parseKeyValues(await read('memory.stat'));
    const own = parseLimit(await read('memory.limit_in_bytes'));
    const hierarchical = stat.hierarchical_memory_limit ?? Infinity;
    const inherited = hierarchical >= NO_LIMIT_FROM ? Infinity : hierarchical;
    const detail: Record<string, number> = {
      version: 1,
      usage,
      inactiveFile: stat.total_inactive_file ?? 0,
      limit: Math.min(own, inherited),
    };
    const oom = await readOptional('memory.oom_control');
    if (oom !== undefined) {
      const fields = parseKeyValues(oom);
      detail.oomKill = fields.oom_kill ?? 0;
      detail.underOom = fields.under_oom ?? 0;
    }
    const failcnt = await readOptional('memory.failcnt');
    if (failcnt !== undefined && /^\d+$/.test(failcnt.trim())) detail.failcnt = Number(failcnt);
    return { bytes: Math.max(0, usage - detail.inactiveFile!), detail };
  };

  return {
    description: `cgroup ${dir}`,
    async sample() {
      version ??= await detectCgroupVersion(dir);
      return version === 2 ? v2() : v1();
    },
  };
}

/** A Prometheus text endpoint exporting a memory metric in bytes (e.g. relay_rss_anon_bytes). */
export function prometheusSampler(url: string, metric: string, timeoutMs = 1000): Sampler {
  return {
    description: `${metric} at ${url}`,
    async sample() {
      let text: string;
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        text = await res.text();
      } catch (err) {
        throw new SamplerError(`cannot read ${url}: ${(err as Error).message}`);
      }
      const value = parsePrometheusValue(text, metric);
      if (value === undefined) throw new SamplerError(`${url} exports no metric ${metric}`);
      return { bytes: value, detail: { [metric]: value } };
    },
  };
}
