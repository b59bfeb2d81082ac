/**
 * What the kernel's cgroup files say, as pure functions of their text: where this process's
 * memory cgroup is (v1 or v2), its OOM kill counter, and its working set (usage less inactive
 * file pages, the kubelet's figure, as the feed reads it).
 */
import { parseKeyValues } from '../../pressure/feed/samplers.js';

export type CgroupVersion = 1 | 2;

/** The files of a memory cgroup, by version. */
export const MEMORY_FILES = {
  1: {
    usage: 'memory.usage_in_bytes',
    limit: 'memory.limit_in_bytes',
    stat: 'memory.stat',
    inactiveFile: 'total_inactive_file',
    activeFile: 'total_active_file',
    anon: 'total_rss',
    kills: 'memory.oom_control',
    peak: 'memory.max_usage_in_bytes',
  },
  2: {
    usage: 'memory.current',
    limit: 'memory.max',
    stat: 'memory.stat',
    inactiveFile: 'inactive_file',
    activeFile: 'active_file',
    anon: 'anon',
    kills: 'memory.events',
    peak: 'memory.peak',
  },
} as const;

export interface MountedHierarchy {
  version: CgroupVersion;
  /** Where the hierarchy is mounted, and which of its paths the mount shows at that place. */
  mountPoint: string;
  mountRoot: string;
}

/**
 * The memory hierarchy from /proc/self/mountinfo: a v1 `cgroup` mount with the memory
 * option, else the v2 (`cgroup2`) mount. A v2 mount may lack the memory controller: the
 * caller checks cgroup.controllers.
 */
export function memoryHierarchy(mountinfo: string): MountedHierarchy | undefined {
  let v2: MountedHierarchy | undefined;
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const fields = left.split(' ');
    const [fsType, , superOptions = ''] = right.split(' ');
    const mountRoot = unescapeMount(fields[3] ?? '');
    const mountPoint = unescapeMount(fields[4] ?? '');
    if (fsType === 'cgroup' && superOptions.split(',').includes('memory')) {
      return { version: 1, mountPoint, mountRoot };
    }
    if (fsType === 'cgroup2' && !v2) v2 = { version: 2, mountPoint, mountRoot };
  }
  return v2;
}

/** mountinfo escapes space, tab, newline and backslash as octal (\040 ...). */
function unescapeMount(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * This process's group in the hierarchy, from /proc/self/cgroup: the `memory` line for v1
 * ("4:memory:/a/b"), the unified line for v2 ("0::/a/b").
 */
export function ownGroupPath(procCgroup: string, version: CgroupVersion): string | undefined {
  for (const line of procCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const controllers = m[2]!.split(',');
    if (version === 1 ? controllers.includes('memory') : m[1] === '0' && m[2] === '') return m[3];
  }
  return undefined;
}

/** The directory of this process's memory cgroup, or why there is none. */
export function ownMemoryGroupDir(
  procCgroup: string,
  mountinfo: string,
): { version: CgroupVersion; dir: string } | { problem: string } {
  const mount = memoryHierarchy(mountinfo);
  if (!mount) return { problem: 'no cgroup memory hierarchy is mounted (/proc/self/mountinfo)' };
  const own = ownGroupPath(procCgroup, mount.version);
  if (own === undefined) {
    return { problem: `this process is in no v${mount.version} memory group (/proc/self/cgroup)` };
  }
  // A mount may show a subtree (containers): paths are relative to the hierarchy's root.
  const root = mount.mountRoot === '/' ? '' : mount.mountRoot;
  if (root && own !== root && !own.startsWith(`${root}/`)) {
    return {
      problem: `this process's group ${own} is outside the mounted part ${mount.mountRoot} of the hierarchy`,
    };
  }
  const rel = own.slice(root.length).replace(/^\/+/, '');
  return { version: mount.version, dir: rel ? `${mount.mountPoint}/${rel}` : mount.mountPoint };
}

/** The OOM kill counter: `oom_kill N` of v1 memory.oom_control and of v2 memory.events. */
export function parseOomKills(text: string): number | undefined {
  return parseKeyValues(text).oom_kill;
}

/** A limit file's value in bytes: v2 "max" and v1's huge "no limit" number are Infinity. */
export function parseLimit(text: string): number {
  const t = text.trim();
  if (t === 'max') return Infinity;
  const n = Number(t);
  // v1 reports "no limit" as the largest page-aligned 63-bit value.
  return Number.isFinite(n) && n < 2 ** 62 ? n : Infinity;
}

export interface WorkingSet {
  usageBytes: number;
  inactiveFileBytes: number;
  /** Usage less inactive file pages: what the kernel cannot take back without a kill. */
  workingSetBytes: number;
  /** Of the working set: anonymous memory (the heap), and file pages in active use. */
  anonBytes: number;
  activeFileBytes: number;
}

export function workingSet(
  version: CgroupVersion,
  usageText: string,
  statText: string,
): WorkingSet {
  const usageBytes = Number(usageText.trim());
  const stat = parseKeyValues(statText);
  const files = MEMORY_FILES[version];
  const inactiveFileBytes = stat[files.inactiveFile] ?? 0;
  return {
    usageBytes,
    inactiveFileBytes,
    workingSetBytes: Math.max(0, usageBytes - inactiveFileBytes),
    anonBytes: stat[files.anon] ?? 0,
    activeFileBytes: stat[files.activeFile] ?? 0,
  };
}
