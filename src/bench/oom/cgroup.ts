/**
 * A memory cgroup the OOM benchmark creates, limits, reads and removes: v1 (memory.limit_in_bytes)
 * or v2 (memory.max), whichever the parent directory is. Anything that stops the group from
 * being made, limited or read is a CgroupUnavailableError that says why: the benchmark never
 * runs without the kernel's limit.
 */
import { existsSync, readFileSync, readdirSync, rmdirSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CgroupVersion, WorkingSet } from './cgroup-files.js';
import {
  MEMORY_FILES,
  ownMemoryGroupDir,
  parseLimit,
  parseOomKills,
  workingSet,
} from './cgroup-files.js';

export class CgroupUnavailableError extends Error {
  override name = 'CgroupUnavailableError';
}

export interface GroupReading extends WorkingSet {
  limitBytes: number;
  /** The kernel's own count of processes it killed in this group for want of memory. */
  oomKills: number;
  /** The kernel's high-water mark of usage (page cache included), when it keeps one. */
  peakUsageBytes: number | null;
}

/** Names of the groups this process made: `sluice-oom-<pid>-<n>`. */
const PREFIX = 'sluice-oom-';
const REMOVE_DEADLINE_MS = 15_000;

/** Groups still standing, so an exit without cleanup at least tries (see below). */
const standing = new Set<MemoryGroup>();
process.once('exit', () => {
  for (const group of standing) group.removeNow();
});

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** This process's own memory group, where the benchmark's groups go by default. */
export function defaultParent(): string {
  let procCgroup: string;
  let mountinfo: string;
  try {
    procCgroup = readFileSync('/proc/self/cgroup', 'utf8');
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch (err) {
    throw new CgroupUnavailableError(`cannot read this process's cgroup: ${errorText(err)}`);
  }
  const own = ownMemoryGroupDir(procCgroup, mountinfo);
  if ('problem' in own) throw new CgroupUnavailableError(own.problem);
  return own.dir;
}

/** The version of the memory group `dir`, or why it is not one we can make children in. */
async function parentVersion(dir: string): Promise<CgroupVersion> {
  if (!existsSync(dir)) throw new CgroupUnavailableError(`${dir} does not exist`);
  if (existsSync(path.join(dir, MEMORY_FILES[1].limit))) return 1;
  const controllersFile = path.join(dir, 'cgroup.controllers');
  if (!existsSync(controllersFile)) {
    throw new CgroupUnavailableError(
      `${dir} is not a memory cgroup (neither ${MEMORY_FILES[1].limit}, v1, nor cgroup.controllers, v2)`,
    );
  }
  const controllers = (await readFile(controllersFile, 'utf8')).trim().split(/\s+/);
  if (!controllers.includes('memory')) {
    throw new CgroupUnavailableError(
      `${dir} is a cgroup v2 group without the memory controller (cgroup.controllers: ${controllers.join(' ') || 'none'})`,
    );
  }
  const subtree = path.join(dir, 'cgroup.subtree_control');
  const delegated = (await readFile(subtree, 'utf8')).trim().split(/\s+/);
  if (!delegated.includes('memory')) {
    try {
      await writeFile(subtree, '+memory');
    } catch (err) {
      throw new CgroupUnavailableError(
        `cannot enable the memory controller for ${dir}'s children (${subtree}: ${errorText(err)}); ` +
          'a v2 group that holds processes cannot hand controllers down: give --cgroup-parent ' +
          'a group without processes (e.g. the hierarchy root)',
      );
    }
  }
  return 2;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Empty groups left by a benchmark that was killed before it could remove them. */
function removeLeftovers(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    const m = new RegExp(`^${PREFIX}(\\d+)-\\d+$`).exec(name);
    if (!m || alive(Number(m[1]))) continue;
    try {
      rmdirSync(path.join(parent, name));
    } catch {
      // Not empty (a process of it still runs) or not ours to remove: leave it.
    }
  }
}

let made = 0;

export class MemoryGroup {
  private removed = false;

  private constructor(
    readonly dir: string,
    readonly version: CgroupVersion,
  ) {}

  /** The file a process writes its pid to, to join the group. */
  get procsFile(): string {
    return path.join(this.dir, 'cgroup.procs');
  }

  /** A new group under `parent` (default: this process's own memory group), with no limit yet. */
  static async create(parent = defaultParent()): Promise<MemoryGroup> {
    const version = await parentVersion(parent);
    removeLeftovers(parent);
    const dir = path.join(parent, `${PREFIX}${process.pid}-${++made}`);
    try {
      await mkdir(dir);
    } catch (err) {
      throw new CgroupUnavailableError(
        `cannot create the memory cgroup ${dir}: ${errorText(err)} (it takes root, or a delegated group: --cgroup-parent)`,
      );
    }
    const group = new MemoryGroup(dir, version);
    standing.add(group);
    try {
      if (!existsSync(path.join(dir, MEMORY_FILES[version].limit))) {
        throw new CgroupUnavailableError(
          `${dir} was created but has no ${MEMORY_FILES[version].limit}: ${parent} is not a memory cgroup`,
        );
      }
      await group.setLimit(Infinity);
      await group.read();
    } catch (err) {
      await group.remove();
      throw err instanceof CgroupUnavailableError
        ? err
        : new CgroupUnavailableError(`cannot use the memory cgroup ${dir}: ${errorText(err)}`);
    }
    return group;
  }

  /** The hard limit (Infinity: none). The kernel kills in the group past it. */
  async setLimit(bytes: number): Promise<void> {
    const value = Number.isFinite(bytes)
      ? String(Math.round(bytes))
      : this.version === 1
        ? '-1'
        : 'max';
    await writeFile(path.join(this.dir, MEMORY_FILES[this.version].limit), value);
  }

  async read(): Promise<GroupReading> {
    const files = MEMORY_FILES[this.version];
    const at = (name: string) => readFile(path.join(this.dir, name), 'utf8');
    const [usage, stat, limit, kills, peak] = await Promise.all([
      at(files.usage),
      at(files.stat),
      at(files.limit),
      at(files.kills),
      at(files.peak).catch(() => undefined),
    ]);
    const oomKills = parseOomKills(kills);
    if (oomKills === undefined) {
      throw new CgroupUnavailableError(
        `${path.join(this.dir, files.kills)} has no oom_kill counter (a kernel older than 4.13?)`,
      );
    }
    return {
      ...workingSet(this.version, usage, stat),
      limitBytes: parseLimit(limit),
      oomKills,
      peakUsageBytes: peak === undefined ? null : Number(peak.trim()),
    };
  }

  /** The processes in the group now. */
  pids(): number[] {
    try {
      return readFileSync(this.procsFile, 'utf8')
        .split('\n')
        .filter((l) => /^\d+$/.test(l.trim()))
        .map(Number);
    } catch {
      return [];
    }
  }

  /** Kill whatever is still in the group, wait until it is empty, and remove it. */
  async remove(): Promise<void> {
    if (this.removed) return;
    const deadline = Date.now() + REMOVE_DEADLINE_MS;
    for (;;) {
      for (const pid of this.pids()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      try {
        await rmdir(this.dir);
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') break;
        if (code !== 'EBUSY' || Date.now() > deadline) {
          throw new Error(`could not remove the memory cgroup ${this.dir}: ${errorText(err)}`, {
            cause: err,
          });
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    this.removed = true;
    standing.delete(this);
  }

  /** At process exit, synchronously: kill and try once (an empty group goes). */
  removeNow(): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    try {
      rmdirSync(this.dir);
    } catch {
      // Its processes are still dying: the next benchmark removes it (removeLeftovers).
    }
  }
}
