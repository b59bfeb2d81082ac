/** `["EVENT"`: how relays write a subscription's events, byte for byte. */
const EVENT_HEAD = [0x5b, 0x22, 0x45, 0x56, 0x45, 0x4e, 0x54, 0x22] as const;

/**
 * Whether a message starts `["EVENT"` exactly: the common spelling, told apart with eight byte
 * compares rather than a string made for a regular expression, since a subscription's answer
 * passes through here once per event. A spelling with spaces is valid JSON too: callers that
 * must recognise it fall back to their regular expression.
 */
export function startsCompactEvent(data: Buffer): boolean {
  if (data.length < EVENT_HEAD.length) return false;
  for (let i = 0; i < EVENT_HEAD.length; i++) {
    if (data[i] !== EVENT_HEAD[i]) return false;
  }
  return true;
}
