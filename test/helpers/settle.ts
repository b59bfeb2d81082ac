/**
 * What the WebSocket pump does with a session's actions after a relay message (see
 * ws-connection.ts), in process: each ticket settled, and a forgery the settlement proves
 * counted against the connection. Returns what was done, in order (the tickets' steps, `close`
 * when the connection reaches its bound, and every other action's type).
 */
import type { NostrSession, SessionAction } from '../../src/nostr/session.js';

export async function settleActions(
  session: NostrSession,
  actions: readonly SessionAction[],
  each?: (action: SessionAction) => void,
): Promise<string[]> {
  const done: string[] = [];
  for (const action of actions) {
    each?.(action);
    if (action.type !== 'settle') {
      done.push(action.type);
      continue;
    }
    const settled = await action.ticket.settle(action.verdict);
    for (const step of settled.steps) {
      done.push(step === 'claim' ? `claim shared=${!action.ticket.terms.unverified}` : step);
    }
    if (settled.invalid && session.invalid()) done.push('close');
  }
  return done;
}
