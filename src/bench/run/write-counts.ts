/** What writers got back, by kind: the tally the closed-loop and OOM benchmarks share. */
export interface WriteCounts {
  /** Answers received (errors are not answers). */
  requests: number;
  ok2xx: number;
  limited429: number;
  otherNon2xx: number;
  /** No answer: the connection failed or timed out. */
  errors: number;
}

export function emptyCounts(): WriteCounts {
  return { requests: 0, ok2xx: 0, limited429: 0, otherNon2xx: 0, errors: 0 };
}

/** Count one write's outcome: an HTTP status, or 0 for no answer. */
export function tally(counts: WriteCounts, status: number): void {
  if (status === 0) {
    counts.errors++;
    return;
  }
  counts.requests++;
  if (status >= 200 && status < 300) counts.ok2xx++;
  else if (status === 429) counts.limited429++;
  else counts.otherNon2xx++;
}
