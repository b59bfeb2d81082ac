/**
 * The few plain commands the pressure feed and board need, the same for every client: each
 * driver in clients/ adapts its library's.
 */
export interface KeyValue {
  /** SET with a lease: the key disappears unless it is written again within `pxMs`. */
  setWithLease(key: string, value: string, pxMs: number): Promise<void>;
  /** SET without expiry. */
  set(key: string, value: string): Promise<void>;
  get(key: string): Promise<string | null>;
  /** SET NX with a lease: true when this call created the key, false when it existed. */
  claim(key: string, value: string, pxMs: number): Promise<boolean>;
  del(key: string): Promise<void>;
  /** PUBLISH; resolves with the number of subscribers that received it (cluster: on that node). */
  publish(channel: string, message: string): Promise<number>;
}
