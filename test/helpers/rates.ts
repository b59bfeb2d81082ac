/** The most events within any one second (a window [t, t + 1000)), from their times in ms. */
export function maxInAnySecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= 1000) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}
