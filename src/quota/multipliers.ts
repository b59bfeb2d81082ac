/**
 * What quota reads of the pressure side: each relay node's multiplier, and its changes. The
 * follower's MultiplierBoard is one; quota depends on this, not on the board.
 */
export interface NodeMultipliers {
  /** The node's multiplier now, in [0, 1]. */
  get(nodeId: string): { readonly value: number };
  /** Call `listener` with each node's value now, then on every change. */
  onChange(listener: (m: { readonly nodeId: string; readonly value: number }) => void): void;
}
