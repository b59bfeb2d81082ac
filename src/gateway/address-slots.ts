/**
 * Connections held per source address, counted from the moment an upgrade is taken on (so
 * handshakes still opening count too) until the connection is gone. An address holds an entry
 * only while it holds a connection, so the map is bounded by the open connections.
 */
export class AddressSlots {
  private readonly held = new Map<string, number>();

  constructor(private readonly maxPerAddress: number) {}

  /** A release function (idempotent) for the slot taken, or undefined when the address is full. */
  acquire(address: string): (() => void) | undefined {
    const count = this.held.get(address) ?? 0;
    if (count >= this.maxPerAddress) return undefined;
    this.held.set(address, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(address) ?? 1) - 1;
      if (left > 0) this.held.set(address, left);
      else this.held.delete(address);
    };
  }

  /** Connections an address holds now. */
  count(address: string): number {
    return this.held.get(address) ?? 0;
  }

  /** Addresses holding a connection now: the map's size, never more than the connections. */
  get addresses(): number {
    return this.held.size;
  }
}
