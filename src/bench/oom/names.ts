/** The OOM benchmark's choices, apart from the code so the CLI can list them cheaply. */

/** One heavy writer over its share, or a wave of many identities each under its own. */
export const FLOOD_SHAPES = ['heavy', 'spam'] as const;
export type FloodShape = (typeof FLOOD_SHAPES)[number];

/** What oom-probe offers a relay, to see what moves its memory. */
export const PROBE_WORKLOADS = ['small', 'large', 'slow-readers', 'connections'] as const;
export type ProbeWorkload = (typeof PROBE_WORKLOADS)[number];
