/**
 * The one line each long-running sluice process (gateway, relay, peer, feed) prints on stdout
 * once it serves: JSON, so whoever starts it (the harness, scripts, an operator's supervisor)
 * reads its address and details without parsing prose. Printed last, after every signal
 * handler is in place: a reader may signal at once.
 */
export interface ReadyInfo {
  ready: 'gateway' | 'relay' | 'peer' | 'feed';
  url: string;
  /** The gateway's admin listener. */
  admin?: string;
  /** A multi-worker gateway's worker pids. */
  workers?: number[];
  /** The relay node a relay or a feed stands for. */
  node?: string;
  /** A feed's control law. */
  law?: string;
  /** A peer's effective settings. */
  settings?: Record<string, unknown>;
}

export function readyLine(info: ReadyInfo): string {
  return JSON.stringify(info);
}

const ROLES = new Set(['gateway', 'relay', 'peer', 'feed']);

/** The ready line's content, or undefined for any other line. */
export function parseReadyLine(line: string): ReadyInfo | undefined {
  if (!line.startsWith('{"ready":')) return undefined;
  try {
    const info = JSON.parse(line) as Partial<ReadyInfo>;
    if (!ROLES.has(info.ready as string) || typeof info.url !== 'string') return undefined;
    return info as ReadyInfo;
  } catch {
    return undefined;
  }
}
