// cluster-key-slot ships no types: the one function the tests use.
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string): number;
}
