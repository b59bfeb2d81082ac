#!/usr/bin/env python3
"""The shared-cores table of docs/BENCHMARKS.md from one directory of `bench run` files.

Each configuration ran once per round (`--run N`). Per round, the gateway's CPU per EVENT
(summed over its processes) is divided by the relay's in the same run, and EVENT/s by the
relay alone's on the same workload in the same round; the table gives the mean over the
rounds with the lowest and highest round in brackets, then the absolute figures per round.

    python3 scripts/shared-cores-table.py results/issue32-after
"""
import glob
import json
import os
import sys
from collections import defaultdict


def load(directory):
    runs = defaultdict(dict)  # (implementation, workload, workers) -> run -> figures
    for path in sorted(glob.glob(os.path.join(directory, '*.json'))):
        with open(path) as f:
            r = json.load(f)
        if r.get('status') != 'ok' or not r.get('rates'):
            print(f'skipped (not ok): {os.path.basename(path)}', file=sys.stderr)
            continue
        c = r['config']
        procs = r.get('processes') or []
        cpu = lambda role: sum(p.get('cpuMsPerRequest') or 0 for p in procs if p['role'].startswith(role))
        impl = c['implementation'] + (':cluster' if c.get('mode') == 'cluster' else '')
        workers = '-' if c['implementation'] == 'relay-alone' or c['implementation'].startswith('ws-floor') else str(c.get('workers'))
        # A Nostr variant is the workload with the identity it names (nostr-long-tail: nostr
        # charged by pubkey-long-tail).
        variant = {'pubkey-long-tail': 'nostr-long-tail', 'pubkey-at-limit': 'nostr-at-limit'}
        workload = variant.get(c.get('nostrIdentity'), c['workload'])
        runs[(impl, workload, workers)][c['run']] = {
            'rate': r['rates']['requestsPerSec'],
            # The front end: the gateway's processes, or the bare proxy's (ws-floor[-SHAPE], a peer).
            'gateway': cpu('gateway') + cpu('peer'),
            'relay': cpu('relay'),
            'valkey': cpu('valkey'),
            'trips': (r.get('valkey') or {}).get('scriptCallsPerRequest'),
        }
    return runs


def spread(values):
    if not values:
        return '-'
    mean = sum(values) / len(values)
    return f'{mean:.2f} ({min(values):.2f}-{max(values):.2f})'


def main(directory):
    runs = load(directory)
    print('| implementation | workload | workers | gateway CPU per EVENT / relay\'s | EVENT/s / relay alone |')
    print('|---|---|---|---|---|')
    for (impl, workload, workers), by_run in sorted(runs.items()):
        if impl.startswith('relay-alone'):
            continue
        alone = runs.get(('relay-alone', workload, '-'), {})
        cpu = [f['gateway'] / f['relay'] for f in by_run.values() if f['relay']]
        rate = [f['rate'] / alone[n]['rate'] for n, f in by_run.items() if n in alone]
        print(f'| {impl} | {workload} | {workers} | {spread(cpu)} | {spread(rate)} |')
    print()
    print('| configuration | EVENT/s | gateway CPU ms | relay CPU ms | Valkey CPU ms | round trips / EVENT |')
    print('|---|---|---|---|---|---|')
    for (impl, workload, workers), by_run in sorted(runs.items()):
        figures = [by_run[n] for n in sorted(by_run)]
        col = lambda key, fmt: ' / '.join(fmt(f[key]) for f in figures)
        trips = ' / '.join('-' if f['trips'] is None else f'{f["trips"]:.2f}' for f in figures)
        print(
            f'| {impl}, {workload}, workers {workers} | {col("rate", lambda v: f"{v:,.0f}")} | '
            f'{col("gateway", lambda v: f"{v:.3f}")} | {col("relay", lambda v: f"{v:.3f}")} | '
            f'{col("valkey", lambda v: f"{v:.3f}")} | {trips} |'
        )


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
