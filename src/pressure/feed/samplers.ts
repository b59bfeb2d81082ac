import { readFile } from 'node:fs/promises';
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

/** A cgroup v2: memory.current less inactive_file, with memory.max and PSI in the detail. */
export function cgroupSampler(dir: string): Sampler {
  const read = async (name: string) => {
    try {
      return await readFile(path.join(dir, name), 'utf8');
    } catch (err) {
      throw new SamplerError(`cannot read ${path.join(dir, name)}: ${(err as Error).message}`);
    }
  };
  return {
    description: `cgroup ${dir}`,
    async sample() {
      const current = Number((await read('memory.current')).trim());
      const stat = parseKeyValues(await read('memory.stat'));
      const maxText = (await read('memory.max')).trim();
      const detail: Record<string, number> = {
        current,
        inactiveFile: stat.inactive_file ?? 0,
        max: maxText === 'max' ? Infinity : Number(maxText),
      };
      try {
        Object.assign(detail, parsePressure(await read('memory.pressure')));
      } catch {
        // PSI is optional: kernels without it still give a usable reading.
      }
      return { bytes: Math.max(0, current - (stat.inactive_file ?? 0)), detail };
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
