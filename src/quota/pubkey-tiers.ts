/**
 * identity.pubkeyTiers: which Nostr pubkeys belong to which tier (a paid or invite-only
 * relay's members), read from files of one pubkey a line. Parsing is pure; reading is
 * bounded in size; lookups are one Map get (a hex key).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { decode } from 'nostr-tools/nip19';

/** A file larger than this is refused: about 250,000 pubkeys (65 bytes a line). */
export const MAX_PUBKEY_FILE_BYTES = 16 * 1024 * 1024;

const HEX_PUBKEY = /^[0-9a-f]{64}$/;

export class PubkeyListError extends Error {
  override name = 'PubkeyListError';
}

/** One line's pubkey as lowercase hex, or why it is not one. */
export function pubkeyOfLine(line: string): { hex: string } | { problem: string } {
  const lower = line.toLowerCase();
  if (HEX_PUBKEY.test(lower)) return { hex: lower };
  if (lower.startsWith('npub1')) {
    try {
      const decoded = decode(line as `npub1${string}`);
      if (decoded.type === 'npub') return { hex: decoded.data };
    } catch {
      // Reported below.
    }
    return { problem: 'not a valid npub (bech32 checksum or length)' };
  }
  return { problem: 'expected 64 hex digits or an npub' };
}

/**
 * The pubkeys of one file's text, as lowercase hex: one a line, hex (any case) or npub;
 * blank lines and `#` comments (whole lines, or after the key) are skipped. The first bad
 * line throws, naming the file and the line (never its content beyond 80 characters).
 */
export function parsePubkeyList(text: string, file: string): string[] {
  const keys: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const hash = lines[i]!.indexOf('#');
    const line = (hash === -1 ? lines[i]! : lines[i]!.slice(0, hash)).trim();
    if (line === '') continue;
    const found = pubkeyOfLine(line);
    if ('problem' in found) {
      const shown = line.length > 80 ? `${line.slice(0, 80)}...` : line;
      throw new PubkeyListError(`${file}:${i + 1}: ${found.problem} (got "${shown}")`);
    }
    keys.push(found.hex);
  }
  return keys;
}

/** A file's text, refused past `maxBytes` (checked on the open file, then on what was read). */
export function readBoundedText(file: string, maxBytes = MAX_PUBKEY_FILE_BYTES): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PubkeyListError(
      `${file}: cannot read it (${code === 'ENOENT' ? 'no such file' : (err as Error).message})`,
    );
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) {
      throw new PubkeyListError(
        `${file}: ${size} bytes, more than the ${maxBytes} a pubkey file may hold`,
      );
    }
    // One byte more than allowed: a file that grew since fstat is caught too.
    const buf = Buffer.alloc(Math.min(size, maxBytes) + 1);
    let read = 0;
    for (let n = -1; n !== 0 && read < buf.length; read += n) {
      n = readSync(fd, buf, read, buf.length - read, null);
    }
    if (read > maxBytes) {
      throw new PubkeyListError(`${file}: more than the ${maxBytes} bytes a pubkey file may hold`);
    }
    return buf.toString('utf8', 0, read);
  } finally {
    closeSync(fd);
  }
}

/** Pubkey (lowercase hex) -> tier, for every file of identity.pubkeyTiers. */
export type PubkeyTierMap = ReadonlyMap<string, string>;

/**
 * Read every tier's file (`files`: tier -> path). A pubkey listed under two tiers is an
 * error (which one the operator meant is not for the gateway to guess); so is any bad line
 * or file. Throws PubkeyListError; nothing is half-applied.
 */
export function loadPubkeyTiers(
  files: Readonly<Record<string, string>>,
  read: (file: string) => string = readBoundedText,
): PubkeyTierMap {
  const tiers = new Map<string, string>();
  for (const [tier, file] of Object.entries(files)) {
    const where = `identity.pubkeyTiers.${tier}`;
    let keys: string[];
    try {
      keys = parsePubkeyList(read(file), file);
    } catch (err) {
      if (!(err instanceof PubkeyListError)) throw err;
      throw new PubkeyListError(`${where}: ${err.message}`);
    }
    for (const hex of keys) {
      const other = tiers.get(hex);
      if (other !== undefined && other !== tier) {
        throw new PubkeyListError(
          `${where}: pubkey ${hex} of ${file} is in tier "${other}" (${files[other]}) as well; list it under one tier`,
        );
      }
      tiers.set(hex, tier);
    }
  }
  return tiers;
}
