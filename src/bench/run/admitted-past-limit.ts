/**
 * What a run whose authors send past their quota (`nostr-at-limit`) was admitted, against the
 * limits: every event costs one point (kind 1, under the free size), so an author's stored
 * events are its admitted points, and no author or sender may have more than its limit.
 * Pure: the load's tally of stored events by author in, the figures and failures out.
 */
export interface AdmittedPastLimit {
  /** Each author's quota over the run (one window). */
  authorLimit: number;
  /** Authors with at least one event stored. */
  authors: number;
  /** Authors stored exactly up to their limit: how many the run pushed to it. */
  authorsAtLimit: number;
  /** The most events stored for one author. */
  maxStored: number;
  /** Events stored past their author's limit, summed over authors: must be 0. */
  authorsOverAdmitted: number;
  /** The sender's quota over the run, and the events stored from it (all of the run's). */
  senderLimit: number;
  senderStored: number;
  /** Events stored past the sender's limit: must be 0. */
  senderOverAdmitted: number;
}

export function admittedPastLimit(
  storedByAuthor: readonly number[],
  authorLimit: number,
  senderLimit: number,
): AdmittedPastLimit {
  let authors = 0;
  let authorsAtLimit = 0;
  let maxStored = 0;
  let authorsOverAdmitted = 0;
  let senderStored = 0;
  for (const stored of storedByAuthor) {
    if (stored === 0) continue;
    authors++;
    senderStored += stored;
    maxStored = Math.max(maxStored, stored);
    if (stored === authorLimit) authorsAtLimit++;
    authorsOverAdmitted += Math.max(0, stored - authorLimit);
  }
  return {
    authorLimit,
    authors,
    authorsAtLimit,
    maxStored,
    authorsOverAdmitted,
    senderLimit,
    senderStored,
    senderOverAdmitted: Math.max(0, senderStored - senderLimit),
  };
}

/** Why the figures fail the run: anything admitted past a limit, or no author brought to it. */
export function pastLimitFailures(a: AdmittedPastLimit): string[] {
  const reasons: string[] = [];
  if (a.authorsOverAdmitted > 0) {
    reasons.push(
      `${a.authorsOverAdmitted} events stored past their author's limit of ${a.authorLimit} ` +
        `(the most for one author: ${a.maxStored})`,
    );
  }
  if (a.senderOverAdmitted > 0) {
    reasons.push(
      `${a.senderOverAdmitted} events stored past the sender's limit of ${a.senderLimit}`,
    );
  }
  if (a.authorsAtLimit === 0) {
    reasons.push(
      `no author reached its limit of ${a.authorLimit}: the run shows nothing about over-admission ` +
        '(a longer run, or fewer --authors)',
    );
  }
  return reasons;
}
