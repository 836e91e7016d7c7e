#!/bin/bash
# Usage: OUT=DIR bash benchmarks/load_ab.sh (from the project venv; the reports are DIR/ab-*.md).
# Side by side, one harness (main's load_test.py): the server without heap.py's freeze (--no-settle)
# and with it, alternating; fresh runs, then 100k runs; then one traced run of each.
cd "$(dirname "$0")/.."
L="python benchmarks/load_test.py --clients 8 --calls 2000"
for round in 1 2 3; do
  for side in before after; do
    flag=""; [ $side = before ] && flag="--no-settle"
    echo "$(date +%T) fresh $side $round loadavg $(cut -d' ' -f1 /proc/loadavg)"
    timeout 300 $L $flag --out ${OUT:-/tmp}/ab-fresh-$side-$round.md > /dev/null 2>&1
  done
done
for round in 1 2; do
  for side in before after; do
    flag=""; [ $side = before ] && flag="--no-settle"
    echo "$(date +%T) 100k $side $round loadavg $(cut -d' ' -f1 /proc/loadavg)"
    timeout 300 $L --experiments 100000 $flag --out ${OUT:-/tmp}/ab-100k-$side-$round.md > /dev/null 2>&1
  done
done
for side in before after; do
  flag=""; [ $side = before ] && flag="--no-settle"
  echo "$(date +%T) trace $side loadavg $(cut -d' ' -f1 /proc/loadavg)"
  timeout 300 $L --trace $flag --out ${OUT:-/tmp}/ab-trace-$side.md > /dev/null 2>&1
done
echo "$(date +%T) done loadavg $(cut -d' ' -f1 /proc/loadavg)"
