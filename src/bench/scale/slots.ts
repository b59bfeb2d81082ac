/**
 * Valkey Cluster's key-to-slot rule (CRC16-XMODEM of the hash tag, mod 16384) and the slot
 * map of the simulated cluster: pure functions and one small table.
 */
export const SLOTS = 16384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** CRC16-XMODEM of a string's UTF-16 code units below 256 (keys here are ASCII). */
export function crc16(s: string, from = 0, to = s.length): number {
  let crc = 0;
  for (let i = from; i < to; i++) {
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ s.charCodeAt(i)) & 0xff]!;
  }
  return crc;
}

/** The slot of a key: of its hash tag `{...}` when it has a non-empty one, else of the key. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(key, open + 1, close) % SLOTS;
  }
  return crc16(key) % SLOTS;
}

/** Slots split in equal contiguous ranges over `primaries`, as a cluster is usually formed. */
export function evenSlotOwners(primaries: number): Uint16Array {
  const owners = new Uint16Array(SLOTS);
  for (let s = 0; s < SLOTS; s++) owners[s] = Math.floor((s * primaries) / SLOTS);
  return owners;
}
