#!/usr/bin/env bash
# How soon a cached script reaches its first verbs call (issue 9's goal: 0.5 s on the host), for
# BENCHMARKS.md; not run by CI:
#
#   bench/startup.sh [--launcher LAUNCHER] [RUNS] [SCRIPT]   default: 5 runs of samples/card.main.kts
#
# LAUNCHER is the checkout's bin/rdma-run unless given: an unpacked release archive's bin/rdma-run
# times the archive (its runtime, its AOT cache app/rdma-run.aot). Runs `LAUNCHER SCRIPT --loopback
# -d soft0 --set iterations=1` once to fill the compiled-script cache, then RUNS times with the
# JVM's class-initialization log (-Xlog:class+init, uptime decoration). The first verbs call is the
# session opening the device list, so the uptime at which dev.rdmarun.runtime.DeviceList is
# initialized is the time from the JVM's start to that call (its loading is no clock: the AOT cache
# loads classes at start-up; the JVM's own start before its clock starts, a few milliseconds, is
# not counted). Prints each run's figure and whole wall time, then `first_verbs_call_s=` (median).
# RDMA_RUN_JAVA_OPTS=-XX:AOTMode=off times either without its AOT cache.
# Build first: ./mvnw -DskipTests package (the AOT cache, scripts/target/rdma-run.aot, is used; the
# archive is dist/target/rdma-run-*-linux-x64.tar.gz, to unpack anywhere).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
launcher="$root/bin/rdma-run"
if [ "${1-}" = --launcher ]; then launcher=$2; shift 2; fi
runs=${1:-5}
script=${2:-$root/samples/card.main.kts}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$launcher" "$script" --loopback -d soft0 --set iterations=1 >/dev/null 2>&1
firsts=()
for ((i = 1; i <= runs; i++)); do
  t0=$(date +%s.%N)
  RDMA_RUN_JAVA_OPTS="${RDMA_RUN_JAVA_OPTS-} -Xlog:class+init=info:file=$log:uptime" \
    "$launcher" "$script" --loopback -d soft0 --set iterations=1 >/dev/null 2>&1
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')
  first=$(grep -m1 "Initializing 'dev/rdmarun/runtime/DeviceList'" "$log" | sed 's/^\[\([0-9.]*\)s\].*/\1/')
  echo "run $i: first verbs call at ${first:-?} s, whole run ${wall} s"
  firsts+=("${first:-0}")
done
printf '%s\n' "${firsts[@]}" | sort -g | awk '{a[NR]=$1} END {print "first_verbs_call_s=" a[int((NR+1)/2)]}'
