/** A binary min-heap of events by (time, sequence): equal times keep their order of insertion. */
export interface Timed {
  t: number;
  seq: number;
}

export class EventHeap<E extends Timed> {
  private readonly items: E[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): E | undefined {
    return this.items[0];
  }

  push(item: E): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): E | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(x: Timed, y: Timed): boolean {
  return x.t < y.t || (x.t === y.t && x.seq < y.seq);
}
