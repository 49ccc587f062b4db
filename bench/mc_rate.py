#!/usr/bin/env python3
"""The Monte Carlo rate against the raw kernel rate, and float against double.

    bench/mc_rate.py [--rounds 3] BUILD_DIR [BUILD_DIR ...]

For each build directory (with bin/ukb and bin/ukb_bench_workloads), in
alternating rounds so that the machine's drift hits every build alike:
  - the workloads W1-W4 in double and float on one CPU thread (N = 10^4) and
    W1 in double on two threads (N = 10^5): medians of 5 repetitions,
    randomly interleaved (ukb_bench_workloads);
  - the demo, `ukb run examples/ring_friction.toml --threads 2`: its wall
    time (run.json's wall_seconds) and its effective rate, the sum of the
    samples' accepted steps (run.json's system_steps) over that time.
Prints, per build, the medians over the rounds of: each rate, float/double
per workload, and the demo's effective rate as a share of the raw W1
2-thread rate (each ratio formed within a round, then the median taken).
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILTER = ('^W[1234]/[a-z_0-9]+/(double|float)/cpu/threads:1/N:10000/'
          '|^W1/bead_on_ring/double/cpu/threads:2/N:100000/')
NAMES = {'W1': 'bead_on_ring', 'W2': 'planar_chain_6', 'W3': 'planar_chain_12', 'W4': 'redundant_pendulum'}


def bench(build):
    out = subprocess.run([os.path.join(build, 'bin', 'ukb_bench_workloads'), '--benchmark_filter=' + FILTER,
                          '--benchmark_repetitions=5', '--benchmark_enable_random_interleaving=true',
                          '--benchmark_report_aggregates_only=true', '--benchmark_format=json'],
                         check=True, capture_output=True, text=True).stdout
    rates = {}
    for b in json.loads(out)['benchmarks']:
        if b.get('aggregate_name') != 'median':
            continue
        m = re.match(r'(W\d)/[a-z_0-9]+/(double|float)/cpu/threads:(\d)/', b['run_name'])
        rates[m.groups()] = b['items_per_second']
    return rates


def demo(build):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([os.path.join(build, 'bin', 'ukb'), 'run', os.path.join(ROOT, 'examples', 'ring_friction.toml'),
                        '--out', d, '--threads', '2'], check=True, capture_output=True)
        with open(os.path.join(d, 'run.json')) as f:
            r = json.load(f)
        with open(os.path.join(d, 'results.csv'), 'rb') as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    return r['wall_seconds'], r['system_steps'], digest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('builds', nargs='+')
    a = ap.parse_args()
    rounds = {b: [] for b in a.builds}
    for k in range(a.rounds):
        for b in a.builds:
            rates = bench(b)
            wall, steps, digest = demo(b)
            rounds[b].append((rates, wall, steps, digest))
            print(f'round {k + 1}: {b}: demo {wall:.2f} s', file=sys.stderr)
    digests = {r[3] for b in a.builds for r in rounds[b]}
    print(f'demo results.csv identical across builds and rounds: {len(digests) == 1}')
    med = statistics.median
    for b in a.builds:
        rs = rounds[b]
        print(f'\n{b}')
        print('| workload | double | float | float / double |')
        print('|---|---|---|---|')
        for w, name in NAMES.items():
            d = med(r[0][(w, 'double', '1')] for r in rs)
            f = med(r[0][(w, 'float', '1')] for r in rs)
            ratio = med(r[0][(w, 'float', '1')] / r[0][(w, 'double', '1')] for r in rs)
            print(f'| {w} {name} | {d / 1e3:,.0f} k | {f / 1e3:,.0f} k | {ratio:.2f}x |')
        raw = med(r[0][('W1', 'double', '2')] for r in rs)
        wall = med(r[1] for r in rs)
        eff = med(r[2] / r[1] for r in rs)
        share = med(r[2] / r[1] / r[0][('W1', 'double', '2')] for r in rs)
        print(f'\ndemo: {wall:.2f} s, effective {eff / 1e6:.2f} M steps/s; raw W1 2 threads {raw / 1e6:.2f} M/s; '
              f'effective / raw {100 * share:.0f} % (walls {[round(r[1], 2) for r in rs]})')


if __name__ == '__main__':
    main()
