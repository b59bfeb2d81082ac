/**
 * A single-box run (`bench run --cpus 0,1`): the relay, the gateway and the run's Valkey nodes
 * pinned to the same cores with `taskset` (util-linux), as when gateway, relay and Valkey are
 * deployed on one small host. The gateway is started under taskset, so `workers: auto` counts
 * the cores of the list; the relay and Valkey are pinned by pid (every thread), and Valkey's
 * former affinity is given back when the run ends (it outlives the run).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** "0,1", "0-3", "0,2-3" → sorted distinct CPU numbers; throws on anything else. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.split(',').map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new Error(`bad CPU list "${text}": expected numbers and ranges, as 0,1 or 0-3`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new Error(`bad CPU list "${text}": range ${part} runs backwards`);
    for (let c = from; c <= to; c++) cpus.add(c);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The list as taskset takes it: "0,1". */
export function cpuListText(cpus: readonly number[]): string {
  return cpus.join(',');
}

/** The cores a process may run on (Cpus_allowed_list of /proc/<pid>/status), e.g. "0-1". */
export function allowedCpus(pid: number): string {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(status);
  if (!m) throw new Error(`no Cpus_allowed_list in /proc/${pid}/status`);
  return m[1]!;
}

/**
 * Check that taskset runs and that every CPU of the list is one this process may use (a CPU
 * outside it would be refused by the kernel, or would leave a process pinned to nothing).
 */
export function checkPinning(cpus: readonly number[], flag = '--cpus'): void {
  if (cpus.length === 0) throw new Error(`${flag} names no CPU`);
  const probe = spawnSync('taskset', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${flag} needs taskset (util-linux), which did not run: ${probe.error?.message ?? probe.stderr}`,
    );
  }
  const allowed = parseCpuList(allowedCpus(process.pid));
  const outside = cpus.filter((c) => !allowed.includes(c));
  if (outside.length > 0) {
    throw new Error(
      `${flag} ${cpuListText(cpus)}: CPU ${outside.join(', ')} is not among those this process may use (${cpuListText(allowed)})`,
    );
  }
}

/** `command args` started under `taskset -c LIST` (same pid: taskset execs it); as is without. */
export function underTaskset(
  cpus: readonly number[] | null | undefined,
  command: string,
  args: string[],
): [string, string[]] {
  if (!cpus || cpus.length === 0) return [command, args];
  return ['taskset', ['-c', cpuListText(cpus), command, ...args]];
}

/** Pin every thread of `pid` to `cpus`; throws with taskset's words when it refuses. */
export function pinPid(pid: number, cpus: readonly number[] | string): void {
  const list = typeof cpus === 'string' ? cpus : cpuListText(cpus);
  const r = spawnSync('taskset', ['-a', '-p', '-c', list, String(pid)], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(
      `taskset could not pin pid ${pid} to CPUs ${list}: ${r.error?.message ?? r.stderr.trim()}`,
    );
  }
}

/**
 * Pin processes that outlive the run (Valkey) and remember their affinity: `restore()` gives
 * it back (best effort: a process that is gone needs nothing back).
 */
export function pinForRun(pids: readonly number[], cpus: readonly number[]): { restore(): void } {
  const before = pids.map((pid) => ({ pid, cpus: allowedCpus(pid) }));
  for (const { pid } of before) pinPid(pid, cpus);
  return {
    restore() {
      for (const b of before) {
        try {
          pinPid(b.pid, b.cpus);
        } catch {
          // Gone: nothing to give back.
        }
      }
    },
  };
}
