/**
 * The body of each client's next write: every client (named by its address, as the gateway
 * knows it) sends the pool's events in turn. An honest client never sends again an event it
 * was refused before its retry time, which the gateway holds as a bouncer's early retry
 * (limits.earlyRetries): drawn by request index instead, a busy client's answers would include
 * those holds. A client repeats an event only after the pool's size of its own writes.
 */
export function clientBodies(bodies: readonly string[]): (client: string) => string {
  const sent = new Map<string, number>();
  return (client) => {
    if (bodies.length === 0) throw new RangeError('this load has no bodies to send');
    const nth = sent.get(client) ?? 0;
    sent.set(client, nth + 1);
    return bodies[nth % bodies.length]!;
  };
}

/** Who a request's headers name as its client: the address the gateway charges. */
export function clientOfHeaders(headers: Record<string, string>): string {
  return headers['x-forwarded-for'] ?? headers['x-api-key'] ?? '';
}
