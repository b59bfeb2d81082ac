import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';

interface Cell {
  labels: Record<string, string>;
  n: number;
}

/**
 * A Prometheus counter counted on every write or frame: prom-client hashes and validates the
 * labels of each inc() (its labels() children too), about half a microsecond a call. Here an
 * increment is an addition to a cell found through maps keyed by the label values (strings
 * whose hashes V8 keeps), and the cells go into the counter when it is scraped (collect), so
 * what a scrape reads is exact.
 */
export class HotCounter {
  readonly counter: Counter;
  private readonly cells = new Map<string, Map<string, Map<string, Cell>>>();

  constructor(
    name: string,
    help: string,
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    if (labelNames.length < 1 || labelNames.length > 3) throw new Error('1 to 3 labels');
    const flush = () => this.flush();
    this.counter = new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect: flush,
    });
  }

  /** Count `n` under the label values, in the order of labelNames. */
  add(n: number, a: string, b = '', c = ''): void {
    let byA = this.cells.get(a);
    if (!byA) this.cells.set(a, (byA = new Map<string, Map<string, Cell>>()));
    let byB = byA.get(b);
    if (!byB) byA.set(b, (byB = new Map<string, Cell>()));
    let cell = byB.get(c);
    if (!cell) byB.set(c, (cell = { labels: this.labelsOf([a, b, c]), n: 0 }));
    cell.n += n;
  }

  private labelsOf(values: string[]): Record<string, string> {
    const labels: Record<string, string> = {};
    this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
    return labels;
  }

  private flush(): void {
    for (const byA of this.cells.values()) {
      for (const byB of byA.values()) {
        for (const cell of byB.values()) {
          if (cell.n === 0) continue;
          this.counter.inc(cell.labels, cell.n);
          cell.n = 0;
        }
      }
    }
  }
}
