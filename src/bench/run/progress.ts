/**
 * A progress bar on a terminal; on anything else, nothing. run-all.sh pipes output into its
 * log, so it sets SLUICE_PROGRESS_TTY=1 to have the bar drawn on the terminal directly.
 */
import { openSync, writeSync } from 'node:fs';

let tty: number | null | undefined;

function terminal(): ((text: string) => void) | undefined {
  if (process.stderr.isTTY) return (text) => process.stderr.write(text);
  if (process.env.SLUICE_PROGRESS_TTY !== '1') return undefined;
  // Opened once per process, not once per bar.
  if (tty === undefined) {
    try {
      tty = openSync('/dev/tty', 'w');
    } catch {
      tty = null;
    }
  }
  const fd = tty;
  return fd === null ? undefined : (text) => writeSync(fd, text);
}

export function progressBar(label: string, totalSec: number) {
  const write = terminal();
  if (!write) return { update: (_sec: number) => undefined, done: () => undefined };
  const width = 30;
  return {
    update(sec: number) {
      const share = Math.min(1, sec / totalSec);
      const filled = Math.round(share * width);
      write(
        `\r  ${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${sec.toFixed(0)}/${totalSec}s `,
      );
    },
    done() {
      write('\r\x1b[2K');
    },
  };
}
