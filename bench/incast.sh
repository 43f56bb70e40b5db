#!/usr/bin/env bash
# Incast on one Soft-RoCE device: three senders WRITE to one receiver at once, rdma-run's run of
# four ranks (bench/scenarios/incast-write.main.kts) against three concurrent ib_write_bw pairs,
# perftest's own way to do it (one process per pair, one port each).
#
#   bench/incast.sh [--rounds N] [-s BYTES] [-n ITERATIONS] [-t DEPTH]
#
# On a machine without rxe0 it snapshots the build, warms the compiled-script cache and runs
# itself in the Soft-RoCE VM (../shared/softroce/softroce-vm.sh, 2 vCPUs). Build first:
# ./mvnw -DskipTests package. Logs: target/bench-incast/.
#
# In the VM each rank (and each ib_write_bw process) has its own address on dummy0, 10.77.0.2 for
# the receiver and .3-.5 for the senders, and its own RoCE v2 GID (found by its address): rxe
# keeps traffic between its own addresses in its loopback path. The receiver side runs on vCPU 0,
# the three senders on vCPU 1, for both tools. Each round runs the two tools in turn (odd rounds
# rdma-run first). Defaults as ib_write_bw -s 65536 -n 5000 -t 16.
#   rdma-run: the run of 4 ranks as a user types it (--rank/--ranks/--rendezvous, -n, -s and
#       -g only): each sender's WRITEs after the warm-up `repeat` runs by default (not counted);
#       the figure is the total of rank 0's summary, BW out [MB/sec, 2^20 bytes/s]: the sum of the
#       three senders' rates, each its bytes over its own measured time (they ran at once).
#   perftest: three ib_write_bw servers on 10.77.0.2 (ports P+1..P+3), their three clients
#       started together; the figure is the sum of the clients' BW average [MB/sec].
# Prints every round, then the medians and incast_ratio= (rdma-run / perftest).
# Exit status: 0 when every round has figures from both tools, 1 otherwise.
set -euo pipefail
root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

rounds=3 size=65536 iterations=5000 depth=16
args=("$@")
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    -s) size=${2:?-s needs a size in bytes}; shift ;;
    -n) iterations=${2:?-n needs a number}; shift ;;
    -t) depth=${2:?-t needs a number}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "incast: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# ---- on the host: run this script in the Soft-RoCE VM ----
if [ -z "${SOFTROCE_DEV-}" ]; then
  cd "$root"
  . "$root/e2e/snapshot.sh"
  vm_snapshot incast
  warm_script_cache "$snap" "$snap/bench/scenarios/incast-write.main.kts"
  export BENCH_LOG_DIR="$root/target/bench-incast"
  rm -rf "$BENCH_LOG_DIR" && mkdir -p "$BENCH_LOG_DIR"
  set +e
  "$vm" -C -c 2 -t "${BENCH_VM_TIMEOUT:-3600}" -e RDMA_RUN_CACHE -e BENCH_LOG_DIR -e RDMA_RUN_JAVA_OPTS \
    -- bash "$snap/bench/incast.sh" ${args[@]+"${args[@]}"}
  rc=$?
  set -e
  [ -f "$BENCH_LOG_DIR/summary.txt" ] && cat "$BENCH_LOG_DIR/summary.txt"  # the console can lose its tail
  exit $rc
fi

# ---- in the VM ----
DEV=$SOFTROCE_DEV
RDMA_RUN="$root/bin/rdma-run"
LOGS=${BENCH_LOG_DIR:-/tmp/rdma-run-bench-incast}
mkdir -p "$LOGS"
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$LOGS/config}"  # the per-user secret the ranks share
: >"$LOGS/summary.txt"
. "$root/e2e/rank-addresses.sh"
PROC_TIMEOUT=900
port=19400
say() { echo "$*" | tee -a "$LOGS/summary.txt"; }
median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.3f", a / b }'; }
# cpu K: the receiver (rank 0, the ib_write_bw servers) on vCPU 0, the senders on vCPU 1.
cpu() { [ "$1" = 0 ] && echo 0 || echo 1; }

rank_addresses_add 4 || { echo "incast: $RANK_WHY" >&2; exit 1; }
trap 'rank_addresses_del 4' EXIT
say "incast: 3 senders to 1 on $DEV, -s $size -n $iterations -t $depth, GID indices ${RANK_GIDX[*]}"

# rdma_round R: the 4 ranks; prints the total BW out of rank 0's summary, or nothing.
rdma_round() {
  local r=$1 k pids=() log="$LOGS/rdma-$1"
  port=$((port + 10))
  for k in 0 1 2 3; do
    timeout -k 5 "$PROC_TIMEOUT" taskset -c "$(cpu "$k")" "$RDMA_RUN" "$root/bench/scenarios/incast-write.main.kts" \
      -d "$DEV" -g "${RANK_GIDX[k]}" --timeout 300s --rank "$k" --ranks 4 --rendezvous "10.77.0.2:$port" \
      -n "$iterations" --set size="$size" --set depth="$depth" >"$log.rank$k" 2>&1 &
    pids+=($!)
  done
  local ok=1
  for k in 0 1 2 3; do wait "${pids[k]}" || ok=0; done
  ((ok)) && awk '$1 == "total" && NF == 6 { print $5 }' "$log.rank0"
}

# perftest_round R: 3 ib_write_bw pairs at once; prints the sum of their BW average, or nothing.
perftest_round() {
  local r=$1 k spids=() cpids=() log="$LOGS/perftest-$1" common=(-d "$DEV" -s "$size" -n "$iterations" -t "$depth" -F)
  port=$((port + 10))
  for k in 1 2 3; do
    timeout -k 5 "$PROC_TIMEOUT" taskset -c 0 ib_write_bw "${common[@]}" -x "${RANK_GIDX[0]}" -p $((port + k)) >"$log.server$k" 2>&1 &
    spids+=($!)
  done
  for k in 1 2 3; do
    local t0=$SECONDS
    until [ -n "$(ss -ltnH "sport = :$((port + k))" 2>/dev/null)" ] || ((SECONDS - t0 > 60)); do sleep 0.1; done
  done
  for k in 1 2 3; do
    timeout -k 5 "$PROC_TIMEOUT" taskset -c 1 ib_write_bw "${common[@]}" -x "${RANK_GIDX[k]}" -p $((port + k)) 10.77.0.2 >"$log.client$k" 2>&1 &
    cpids+=($!)
  done
  local ok=1 sum=0 bw
  for k in 0 1 2; do wait "${cpids[k]}" || ok=0; wait "${spids[k]}" || ok=0; done
  for k in 1 2 3; do
    bw=$(awk -v s="$size" '$1 == s && NF >= 5 { v = $4 } END { print v }' "$log.client$k")
    [ -n "$bw" ] || ok=0
    sum=$(awk -v a="$sum" -v b="${bw:-0}" 'BEGIN { printf "%.2f", a + b }')
  done
  ((ok)) && echo "$sum"
}

failed=0 rdma_all="" perftest_all=""
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then rv=$(rdma_round "$r") || true; pv=$(perftest_round "$r") || true
  else pv=$(perftest_round "$r") || true; rv=$(rdma_round "$r") || true; fi
  [ -n "$rv" ] && [ -n "$pv" ] || failed=1
  say "round $r: rdma-run ${rv:-failed} MB/sec, 3 x ib_write_bw ${pv:-failed} MB/sec, ratio $(ratio "$rv" "$pv")"
  rdma_all+=" $rv" perftest_all+=" $pv"
done
rm_=$(echo "$rdma_all" | median) pm=$(echo "$perftest_all" | median)
say "medians: rdma-run $rm_ MB/sec, 3 x ib_write_bw $pm MB/sec"
say "incast_ratio=$(ratio "$rm_" "$pm")"
exit $failed
