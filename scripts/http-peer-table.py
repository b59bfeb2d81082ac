#!/usr/bin/env python3
"""HTTP runs against the peer, from a results directory of `bench run` files (issue 32).

Usage: python3 scripts/http-peer-table.py DIR [KEYS_DIR]

DIR holds runs of the light workload: the peer (fastify-rate-limit), quotas-off and leased
clients, on standalone and cluster, several rounds (--run N). For each implementation and
topology it prints the median over rounds of req/s and of CPU a request, each divided by the
peer's of the same round (range in brackets). KEYS_DIR, runs at --keys 1000, gives each leased
client's req/s divided by quotas off's of the same round.
"""
import glob
import json
import statistics as st
import sys

PEER = "fastify-rate-limit"


def load(directory):
    runs = {}
    for f in glob.glob(f"{directory}/*.json"):
        j = json.load(open(f))
        c = j.get("config", {})
        impl = c.get("implementation", "")
        mode = "cluster" if c.get("mode") == "cluster" or ":cluster" in impl else "standalone"
        front = [p for p in j.get("processes", []) if p.get("role") in ("gateway", "peer")]
        if not front:
            continue
        runs[(impl.replace(":cluster", ""), mode, c.get("run"))] = (
            j["rates"]["requestsPerSec"],
            front[0]["cpuMsPerRequest"],
        )
    return runs


def ratio_line(values):
    return f"{st.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = load(sys.argv[1])
    impls = sorted({k[0] for k in runs}, key=lambda i: (i != PEER, i != "quotas-off", i))
    for mode in ("standalone", "cluster"):
        print(f"\n{mode}: implementation | req/s (median) | / peer's | CPU ms a request | / peer's")
        for impl in impls:
            rates, cpus, rr, cr = [], [], [], []
            for (i, m, run), (rate, cpu) in runs.items():
                if i != impl or m != mode or (PEER, m, run) not in runs:
                    continue
                peer_rate, peer_cpu = runs[(PEER, m, run)]
                rates.append(rate)
                cpus.append(cpu)
                rr.append(rate / peer_rate)
                cr.append(cpu / peer_cpu)
            if rates:
                print(f"{impl} | {st.median(rates):,.0f} | {ratio_line(rr)} | {st.median(cpus):.3f} | {ratio_line(cr)}")
    if len(sys.argv) > 2:
        keys = load(sys.argv[2])
        print("\n--keys runs: client | mode | req/s / quotas off's | CPU ms a request")
        for (impl, mode) in sorted({(k[0], k[1]) for k in keys if k[0] != "quotas-off"}):
            rr, cpus = [], []
            for (i, m, run), (rate, cpu) in keys.items():
                if i == impl and m == mode and ("quotas-off", m, run) in keys:
                    rr.append(rate / keys[("quotas-off", m, run)][0])
                    cpus.append(cpu)
            if rr:
                print(f"{impl} | {mode} | {ratio_line(rr)} | {st.median(cpus):.3f}")


if __name__ == "__main__":
    main()
