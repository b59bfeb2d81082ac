import { readFileSync } from 'node:fs';

export interface ProcessMemory {
  /** Resident set size (VmRSS). */
  rssBytes: number;
  /**
   * Resident anonymous memory (RssAnon): RSS without file-backed pages, so it tracks what
   * the process holds rather than what the page cache lends it.
   */
  rssAnonBytes: number;
}

/** This process's memory from /proc/self/status; RSS for both where /proc is missing. */
export function processMemory(): ProcessMemory {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const rss = kilobytes(status, 'VmRSS');
    const anon = kilobytes(status, 'RssAnon');
    if (rss !== undefined && anon !== undefined) return { rssBytes: rss, rssAnonBytes: anon };
  } catch {
    // Not Linux: fall through.
  }
  const rss = process.memoryUsage.rss();
  return { rssBytes: rss, rssAnonBytes: rss };
}

function kilobytes(status: string, field: string): number | undefined {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
  return m ? Number(m[1]) * 1024 : undefined;
}
