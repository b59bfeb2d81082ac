/**
 * CPU and memory of the processes under test, read from /proc on a fixed period: the
 * gateway, the relays and every Valkey node, never the load generator (the public
 * benchmark's mistake was to report its own process).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export type ProcessRole = 'gateway' | 'peer' | 'relay' | 'feed' | 'valkey';

export interface WatchedProcess {
  role: ProcessRole;
  name: string;
  pid: number;
}

export interface ProcessUsage extends WatchedProcess {
  cpuPercent: { mean: number | null; max: number | null };
  rssBytes: { mean: number | null; max: number | null };
  /** CPU time (user + system) over the whole window, ms; null if the process could not be read. */
  cpuMs: number | null;
  /** cpuMs / the responses of the window (set by the run once it has its counts). */
  cpuMsPerRequest: number | null;
  /** [seconds since start, CPU % of one core over the last period, RSS bytes]. */
  samples: [number, number, number][];
  /** Set when the process could not be read (it exited, or /proc is not there). */
  problem?: string;
}

interface ProcReading {
  cpuTicks: number;
  rssBytes: number;
}

let ticksPerSecond: number | undefined;
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    } catch {
      ticksPerSecond = 100; // Linux's USER_HZ nearly everywhere.
    }
    if (!(ticksPerSecond > 0)) ticksPerSecond = 100;
  }
  return ticksPerSecond;
}

/** utime + stime (fields 14 and 15 of /proc/<pid>/stat), in clock ticks. */
export function parseProcStat(stat: string): number {
  // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field n is rest[n - 3].
  return Number(rest[11]) + Number(rest[12]);
}

export function parseVmRss(status: string): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error('no VmRSS line');
  return Number(m[1]) * 1024;
}

function read(pid: number): ProcReading {
  return {
    cpuTicks: parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')),
    rssBytes: parseVmRss(readFileSync(`/proc/${pid}/status`, 'utf8')),
  };
}

const summary = (xs: number[]) =>
  xs.length
    ? { mean: xs.reduce((a, b) => a + b, 0) / xs.length, max: Math.max(...xs) }
    : { mean: null, max: null };

export class ProcessSampler {
  private timer?: NodeJS.Timeout;
  private readonly last = new Map<number, { at: number; reading: ProcReading }>();
  private readonly samples = new Map<number, [number, number, number][]>();
  private readonly problems = new Map<number, string>();
  private readonly first = new Map<number, ProcReading>();
  private started = 0;

  constructor(
    private readonly processes: WatchedProcess[],
    private readonly periodMs = 250,
  ) {}

  start(): void {
    this.started = performance.now();
    for (const p of this.processes) {
      this.samples.set(p.pid, []);
      this.take(p, this.started, false);
    }
    this.timer = setInterval(() => {
      const now = performance.now();
      for (const p of this.processes) this.take(p, now, true);
    }, this.periodMs);
  }

  private take(p: WatchedProcess, now: number, record: boolean): void {
    if (this.problems.has(p.pid)) return;
    let reading: ProcReading;
    try {
      reading = read(p.pid);
    } catch (err) {
      this.problems.set(p.pid, `cannot read /proc/${p.pid}: ${(err as Error).message}`);
      return;
    }
    const prev = this.last.get(p.pid);
    this.last.set(p.pid, { at: now, reading });
    if (!this.first.has(p.pid)) this.first.set(p.pid, reading);
    if (!record || !prev) return;
    const seconds = (now - prev.at) / 1000;
    const cpu = (100 * (reading.cpuTicks - prev.reading.cpuTicks)) / clockTicks() / seconds;
    this.samples
      .get(p.pid)!
      .push([
        Number(((now - this.started) / 1000).toFixed(3)),
        Number(cpu.toFixed(1)),
        reading.rssBytes,
      ]);
  }

  stop(): ProcessUsage[] {
    clearInterval(this.timer);
    const end = performance.now();
    return this.processes.map((p) => {
      const samples = this.samples.get(p.pid) ?? [];
      // A last reading at the end of the window (not a sample: its period may be short).
      this.take(p, end, false);
      const problem = this.problems.get(p.pid);
      const first = this.first.get(p.pid);
      const last = this.last.get(p.pid);
      return {
        ...p,
        cpuPercent: summary(samples.map((s) => s[1])),
        rssBytes: summary(samples.map((s) => s[2])),
        cpuMs:
          problem || !first || !last
            ? null
            : Number((((last.reading.cpuTicks - first.cpuTicks) * 1000) / clockTicks()).toFixed(1)),
        cpuMsPerRequest: null,
        samples,
        ...(problem ? { problem } : {}),
      };
    });
  }
}

/** Each process's CPU ms per response of the window (null without a CPU figure or responses). */
export function withCpuPerRequest(processes: ProcessUsage[], responses: number): ProcessUsage[] {
  return processes.map((p) => ({
    ...p,
    cpuMsPerRequest:
      p.cpuMs !== null && responses > 0 ? Number((p.cpuMs / responses).toFixed(4)) : null,
  }));
}
