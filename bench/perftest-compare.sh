#!/usr/bin/env bash
# rdma-run against perftest on the same Soft-RoCE device, case by case: the same operation,
# size, iterations, QPs and depths, the two tools alternating, each peer pinned to its own vCPU
# (taskset -c 0 for the server, -c 1 for the client, the same for both tools).
#
#   bench/perftest-compare.sh [--quick] [--rounds N] [--cases REGEX] [--against CHECKOUT]
#
# On a machine without rxe0 it snapshots the build, warms the compiled-script cache and runs
# itself in the Soft-RoCE VM (../shared/softroce/softroce-vm.sh, 2 vCPUs under multi-threaded
# TCG: with one vCPU every round trip waits for a scheduler tick). Build first:
# ./mvnw -DskipTests package. Logs: target/bench/.
#
# Cases and methods (rdma-run side: bench/scenarios/lat.main.kts and bw.main.kts):
#   lat_{send,write,read}_{2,64,4096}  ib_{send,write,read}_lat -s SIZE -n N: t_typical (median
#       one way: round trip / 2; READ: the whole READ), against the scenario's median over N
#       exchanges after a warm-up it does not count: rounds of N exchanges, at least W = 60,000,
#       until the JIT has been quiet for a while (lat.main.kts; its cold figure, the first round,
#       is shown too). Under TCG the JIT's second tier finishes the post path 5-7 s into a run,
#       beyond 20,000 READs: measured then, the window held its compilations (BENCHMARKS.md);
#       inline sends up to the size perftest used in the same round (none on rxe: it does not
#       know the device's inline support).
#   bw_{send,write,read}_{4096,65536}_q{1,4}  ib_*_bw -s SIZE -n N -q QPS -t DEPTH -Q SIGNAL:
#       BW average [MB/sec, 2^20 bytes/s] against the scenario's (which prints MB/s of 10^6 bytes,
#       as bench/soft0.sh needs: converted here), DEPTH in flight per QP, one in SIGNAL signaled,
#       after a warm-up of rounds of N work requests per QP, at least 60,000 up to 4 KiB (where
#       the per-operation cost, compiled or not, decides), until the JIT has been quiet for a while.
#   bw_atomic  ib_atomic_bw -A FETCH_AND_ADD, likewise.
#   pingpong   ibv_rc_pingpong -s 64 -n N against rdma-run pingpong --warmup W: usec/iter (the
#       cold figure is the warm-up's).
#   Warm-ups from the environment: BENCH_LAT_WARMUP (W, also pingpong's), BENCH_BW_WARMUP; the
#   measured iterations of lat_* and bw_* (1000, as perftest's default) from BENCH_LAT_N, BENCH_BW_N:
#   under TCG 1000 writes last about 0.1 s, and a longer window steadies a before/after comparison.
# What a user types, as typed: no warm-up but the tool's own and no tuning, each against the C
# tool given the same flags (both also get the device and GID index, -d and -x or -g, and the
# harness's port; rdma-run also --timeout 120s, which bounds its waits and changes no figure):
#   user_lat_{64,4096}  samples/pingpong-lat.main.kts -s SIZE -n 20000 against ib_send_lat -s SIZE
#       -n 20000: the t_typical of the client's perftest latency block (section rtt one way: the
#       median round trip / 2, from HdrHistogram, 3 significant digits) against perftest's.
#   user_bw_{4096,65536}  samples/write-bw.main.kts -s SIZE -n 5000 -t 16 against ib_write_bw
#       -s SIZE -n 5000 -t 16: the BW average of the client's perftest bandwidth block against
#       perftest's (both MB/sec = 2^20 bytes/s).
#   user_pingpong_64  rdma-run pingpong -s 64 -n 20000 against ibv_rc_pingpong -s 64 -n 20000:
#       usec/iter.
#   user_self_lat  bench/scenarios/self-lat.main.kts, a 64 B ping-pong as a new user writes it
#       (5,000 warm-up exchanges, 20,000 timed with System.nanoTime()): its median one way against
#       the t_typical of ib_send_lat -s 64 -n 20000.
#   user_self_bw  bench/scenarios/self-bw.main.kts, 64 KiB WRITEs 16 in flight as a new user
#       writes them (1,000 warm-up, 5,000 timed): its MB/sec (2^20 bytes/s) against the BW
#       average of ib_write_bw -s 65536 -n 5000 -t 16.
#   cold_lat_64  lat.main.kts op=send size=64 iterations=1000 warmup=0 (no warm-up of the loop:
#       the run ends after the first 1,000 exchanges with the peer, which follow only connect's
#       pre-flight on two local QPs; inline as in lat_*): its median one way against the t_typical
#       of ib_send_lat -s 64 -n 1000.
# --quick: one round of lat_send_64, bw_write_65536_q1, user_lat_64, user_pingpong_64 and
# user_self_lat, each rdma-run client started together with its server (CI runs it to keep each
# kind of run working: the harness's scenarios, a sample, pingpong and a self-timed script; its
# figures judge nothing). The other cases differ from these in flags only (cold_lat_64 is
# lat.main.kts with warmup=0, and lat_send_64 reads its cold figure the same way).
#
# Prints every round, then per case the medians and the ratio rdma-run / C, and last
#   lat_ratio=  bw_ratio=  pingpong_ratio=  user_lat_ratio=  user_bw_ratio=  user_pingpong_ratio=
#   user_self_lat_ratio=  user_self_bw_ratio=  cold_lat_ratio=   (medians of the cases' ratios)
#   jvm_runs=  jvm_crashes=                  (guest JVMs that died of a signal; see BENCHMARKS.md)
# --against CHECKOUT: another built checkout of rdma-run (a worktree of an older commit, say:
#   git worktree add --detach ../before REV && (cd ../before && ./mvnw -DskipTests package)),
#   run in the same VM boot and the same rounds as this build, the two taking turns going first
#   (odd rounds this one), each with its own launcher, scripts and compiled-script cache: a before/after comparison that the VM's
#   drift between boots does not blur. Each case then also prints `against` and against/C, and a
#   last line `against_lat_ratio= ...` holds the other build's medians as the line above holds this one's.
# Exit status: 0 when every case has figures from both tools, 1 otherwise.
set -euo pipefail
root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

quick=0
rounds=5
only=""
against=""
args=("$@")
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --cases) only=${2:?--cases needs a regular expression}; shift ;;
    --against) against=${2:?--against needs a built checkout}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "perftest-compare: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
((quick)) && rounds=1

# ---- on the host: run this script in the Soft-RoCE VM ----
if [ -z "${SOFTROCE_DEV-}" ]; then
  cd "$root"
  . "$root/e2e/snapshot.sh"
  vm_snapshot perftest-compare
  warm_script_cache "$snap" "$snap"/bench/scenarios/*.main.kts "$snap"/samples/pingpong-lat.main.kts "$snap"/samples/write-bw.main.kts
  if [ -n "$against" ]; then
    [ -f "$against/scripts/target/rdma-run.jar" ] && [ -f "$against/samples/target/classpath.txt" ] ||
      { echo "perftest-compare: --against $against is not a built checkout (./mvnw -DskipTests package there)" >&2; exit 2; }
    export BENCH_AGAINST="$snap/against"
    ( root=$(cd "$against" && pwd -P)
      snapshot_build "$BENCH_AGAINST"
      warm_script_cache "$BENCH_AGAINST" "$BENCH_AGAINST"/bench/scenarios/*.main.kts \
        "$BENCH_AGAINST"/samples/pingpong-lat.main.kts "$BENCH_AGAINST"/samples/write-bw.main.kts )
  fi
  export BENCH_LOG_DIR="$root/target/bench"
  rm -rf "$BENCH_LOG_DIR" && mkdir -p "$BENCH_LOG_DIR"
  set +e
  "$vm" -C -c 2 -t "${BENCH_VM_TIMEOUT:-9000}" -e RDMA_RUN_CACHE -e BENCH_LOG_DIR -e RDMA_RUN_JAVA_OPTS -e BENCH_LAT_WARMUP -e BENCH_BW_WARMUP -e BENCH_LAT_N -e BENCH_BW_N -e BENCH_AGAINST \
    -- bash "$snap/bench/perftest-compare.sh" ${args[@]+"${args[@]}"}
  rc=$?
  set -e
  # The summary again, last: the VM's serial console can lose its tail.
  [ -f "$BENCH_LOG_DIR/summary.txt" ] && cat "$BENCH_LOG_DIR/summary.txt"
  exit $rc
fi

# ---- in the VM ----
against=${BENCH_AGAINST-}  # the snapshot of --against's checkout, as the host made it
DEV=$SOFTROCE_DEV
IP=$SOFTROCE_IP
GIDX=${SOFTROCE_GID_INDEX:-1}
RDMA_RUN="$root/bin/rdma-run"
SCENARIOS="$root/bench/scenarios"
SAMPLES="$root/samples"
LOGS=${BENCH_LOG_DIR:-/tmp/rdma-run-bench}
mkdir -p "$LOGS"
# The guest sees the host's home read-only: the per-user secret both peers share lives with the logs.
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$LOGS/config}"
: >"$LOGS/summary.txt"
[ "$(nproc)" -ge 2 ] || echo "perftest-compare: warning: $(nproc) CPU: latency figures wait for scheduler ticks" >&2
PROC_TIMEOUT=600
port=19200
jvm_runs=0
jvm_crashes=0

lat_n=${BENCH_LAT_N:-1000}
lat_warmup=${BENCH_LAT_WARMUP:-60000}
bw_n=${BENCH_BW_N:-1000}
# Small messages are bound by the per-operation cost, which the JIT must have compiled first (1000
# warm-up writes of 4 KiB measured the interpreter); large ones by moving the data.
bw_warmup_small=${BENCH_BW_WARMUP:-60000}
depth=128
signal=100

# log NAME: the log file of one side of one run
say() { echo "$*" | tee -a "$LOGS/summary.txt"; }

# wait_port PORT PID: until PORT listens (or PID exits: its log says why).
wait_port() {
  local t0=$SECONDS
  until [ -n "$(ss -ltnH "sport = :$1" 2>/dev/null)" ]; do
    kill -0 "$2" 2>/dev/null || return 1
    ((SECONDS - t0 < 120)) || return 1
    sleep 0.1
  done
}

# pair LOG SERVER_CMD... -- CLIENT_CMD...: server on vCPU 0, client on vCPU 1; 0 when both exit 0.
# The client starts once the server listens, as a user would start it. Under --quick, whose
# figures judge nothing, an rdma-run client starts with its server (it retries a server that does
# not listen yet): a JVM takes 15-20 s to start in the VM, and CI's time is short.
# A JVM that dies of a signal (TCG has crashed JIT code) is counted and its run tried once more.
pair() {
  local log=$1 try server_cmd=() client_cmd=() spid src crc
  shift
  while [ "$1" != -- ]; do server_cmd+=("$1"); shift; done
  shift
  client_cmd=("$@")
  for try in 1 2; do
    port=$((port + 1))
    local s=("${server_cmd[@]//@PORT@/$port}") c=("${client_cmd[@]//@PORT@/$port}")
    echo "+ ${s[*]}" >"$log.server"
    echo "+ ${c[*]}" >"$log.client"
    timeout -k 5 "$PROC_TIMEOUT" taskset -c 0 "${s[@]}" >>"$log.server" 2>&1 &
    spid=$!
    if { ((quick)) && [[ ${s[0]} == "$RDMA_RUN" ]]; } || wait_port "$port" "$spid"; then
      timeout -k 5 "$PROC_TIMEOUT" taskset -c 1 "${c[@]}" >>"$log.client" 2>&1 && crc=0 || crc=$?
    else
      crc=125
    fi
    wait "$spid" && src=0 || src=$?
    if [[ ${s[0]} == "$RDMA_RUN" ]]; then
      jvm_runs=$((jvm_runs + 2))
      local crashed=0 side
      for side in server client; do
        if grep -q "A fatal error has been detected by the Java Runtime" "$log.$side"; then
          crashed=1
          jvm_crashes=$((jvm_crashes + 1))
        fi
      done
      if ((crashed && try == 1)); then
        say "  (a guest JVM crashed in $(basename "$log"); trying once more)"
        mv "$log.server" "$log.server.crashed"; mv "$log.client" "$log.client.crashed"
        continue
      fi
    fi
    [ "$src" = 0 ] && [ "$crc" = 0 ]
    return
  done
}

# Figures from the logs. lat_of and bw_of read perftest's result rows (#bytes first), which
# rdma-run's tables print as perftest does: the client's t_typical of a latency test (for a
# measureRoundTrip section, one way: RTT / 2) and the BW average of a bandwidth test. rdma-run's
# own rows, after perftest's block, start with a label (`rtt RTT`, `work requests`, `total`).
lat_of() { awk -v s="$2" '$1 == s && NF >= 9 { v = $5 } END { print v }' "$1"; }       # perftest t_typical
bw_of() { awk -v s="$2" '$1 == s && NF >= 5 { v = $4 } END { print v }' "$1"; }        # perftest BW average
iter_of() { awk '/usec\/iter/ { for (i = 2; i <= NF; i++) if ($i == "usec/iter") v = $(i - 1) } END { print v }' "$1"; }
field_of() { sed -n "s/.*rdma-run-bench .*$2=\([0-9.]*\).*/\1/p" "$1" | tail -1; }
median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
mib_of() { awk -v v="$1" 'BEGIN { if (v != "") printf "%.2f", v * 1000000 / 1048576 }'; }   # MB/s (10^6) -> perftest's (2^20)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.3f", a / b }'; }

failed=0
kinds=(lat bw pingpong user_lat user_bw user_pingpong user_self_lat user_self_bw cold_lat)
declare -A ratios=() against_ratios=()

# rdma_side BASE C_LOG: one rdma-run run of the current case (kind, size, r_args) with $RDMA_RUN; sets rv
# (its figure) and rc_v (its cold figure, where the case has one).
rdma_side() {
  local base=$1
  rv="" rc_v=""
  if [[ $kind == *pingpong ]]; then
    if pair "$base" "$RDMA_RUN" pingpong "${r_args[@]}" -p @PORT@ -- "$RDMA_RUN" pingpong "${r_args[@]}" -p @PORT@ "$IP"; then
      rv=$(iter_of "$base.client")
      if [ "$kind" = pingpong ]; then rc_v=$(grep 'warm-up (not counted)' "$base.client" | iter_of /dev/stdin); fi
    fi
  else
    local common=("${r_args[@]}" -d "$DEV" -g "$GIDX" --timeout 120s) inline
    # lat.main.kts: inline sends as perftest used them this round (it disables them on devices it
    # does not know, rxe among them). The user's scripts run as typed.
    inline=$(sed -n 's/.*Max inline data *: *\([0-9]*\).*/\1/p' "$2" | head -1)
    [[ $kind == lat || $kind == cold_lat ]] && [ -n "$inline" ] && common+=(--set "inline=$inline")
    if pair "$base" "$RDMA_RUN" "${common[@]}" --listen @PORT@ -- "$RDMA_RUN" "${common[@]}" --peer "$IP:@PORT@"; then
      case $kind in
        lat) rv=$(field_of "$base.client" steady_us); rc_v=$(field_of "$base.client" cold_us) ;;
        bw) rv=$(mib_of "$(field_of "$base.client" steady_MBps)"); rc_v=$(mib_of "$(field_of "$base.client" cold_MBps)") ;;
        cold_lat) rv=$(field_of "$base.client" cold_us) ;;
        user_lat) rv=$(lat_of "$base.client" "$size") ;;
        user_bw) rv=$(bw_of "$base.client" "$size") ;;
        user_self_lat) rv=$(field_of "$base.client" one_way_us) ;;
        user_self_bw) rv=$(field_of "$base.client" MiBps) ;;
      esac
    fi
  fi
}

# against_side BASE: rdma_side of --against's build (its launcher, scripts and script cache) into
# BASE.a; sets av, and leaves rv and rc_v as they were.
against_side() {
  local saved=("$RDMA_RUN" "$RDMA_RUN_CACHE") mine=("${r_args[@]}") rv_here=$rv rc_here=$rc_v
  RDMA_RUN="$against/bin/rdma-run" RDMA_RUN_CACHE="$against/script-cache"
  r_args=("${mine[@]/#$root\//$against/}")
  rdma_side "$1.a" "$1.c.client"
  av=$rv
  RDMA_RUN=${saved[0]} RDMA_RUN_CACHE=${saved[1]} r_args=("${mine[@]}") rv=$rv_here rc_v=$rc_here
}

# run_case NAME KIND C_CMD... -- RDMA_ARGS...: KIND, one of $kinds, says how each side's figure
# is read (*lat: perftest's t_typical, *bw: its BW average, *pingpong: usec/iter), whether
# RDMA_ARGS follow `rdma-run pingpong` (*pingpong) or are a script and its flags, and which summary
# ratio the case's joins.
run_case() {
  local name=$1 kind=$2 c_cmd=() r_args=() round cv rv rc_v av c_all="" r_all="" rc_all="" a_all=""
  shift 2
  [[ -n $only && ! $name =~ $only ]] && return 0
  while [ "$1" != -- ]; do c_cmd+=("$1"); shift; done
  shift
  r_args=("$@")
  mkdir -p "$LOGS/$name"
  for ((round = 1; round <= rounds; round++)); do
    local base="$LOGS/$name/$round"
    cv="" rv="" rc_v="" av=""
    # perftest (or ibv_rc_pingpong) first, then rdma-run: alternating, round after round
    if pair "$base.c" "${c_cmd[@]}" -p @PORT@ -- "${c_cmd[@]}" -p @PORT@ "$IP"; then
      case $kind in
        *lat) cv=$(lat_of "$base.c.client" "$size") ;;
        *bw) cv=$(bw_of "$base.c.client" "$size") ;;
        *pingpong) cv=$(iter_of "$base.c.client") ;;
      esac
    fi
    # With --against, the two builds take turns going first (odd rounds this one): the run right
    # after perftest's must not always be the same build's.
    if [ -n "$against" ] && ((round % 2 == 0)); then
      against_side "$base"
      rdma_side "$base.r" "$base.c.client"
    else
      rdma_side "$base.r" "$base.c.client"
      [ -z "$against" ] || against_side "$base"
    fi
    say "  $name round $round: C ${cv:-failed}, rdma-run ${rv:-failed}${rc_v:+ (cold $rc_v)}${against:+, against ${av:-failed}}"
    c_all+=" $cv" r_all+=" $rv" rc_all+=" $rc_v" a_all+=" $av"
  done
  local cm rm rcm q unit am aq=""
  cm=$(echo "$c_all" | median) rm=$(echo "$r_all" | median) rcm=$(echo "$rc_all" | median) am=$(echo "$a_all" | median)
  q=$(ratio "$rm" "$cm")
  case $kind in *lat | *pingpong) unit=us ;; *bw) unit=MB/s ;; esac
  if [ -n "$against" ]; then
    aq=$(ratio "$am" "$cm")
    [ -n "$aq" ] && against_ratios[$kind]="${against_ratios[$kind]-} $aq"
    [ -n "$aq" ] || failed=1
  fi
  say "$name: C ${cm:-n/a} $unit, rdma-run ${rm:-n/a} $unit${rcm:+ (cold $rcm)}, rdma-run/C ${q:-n/a}${against:+; against ${am:-n/a} $unit, against/C ${aq:-n/a}}"
  if [ -z "$q" ]; then
    failed=1
    return 0
  fi
  ratios[$kind]="${ratios[$kind]-} $q"
}

lat_case() { # OP SIZE
  local op=$1 size=$2
  run_case "lat_${op}_$size" lat "ib_${op}_lat" -d "$DEV" -x "$GIDX" -s "$size" -n "$lat_n" -F \
    -- "$SCENARIOS/lat.main.kts" --set "op=$op" --set "size=$size" --set "iterations=$lat_n" --set "warmup=$lat_warmup"
}
bw_case() { # OP SIZE QPS
  local op=$1 size=$2 qps=$3 c=("ib_${1}_bw")
  [ "$op" = atomic ] && c+=(-A FETCH_AND_ADD) || c+=(-s "$size")
  run_case "bw_${op}_${size}_q$qps" bw "${c[@]}" -d "$DEV" -x "$GIDX" -n "$bw_n" -q "$qps" -t "$depth" -Q "$signal" -F \
    -- "$SCENARIOS/bw.main.kts" --set "op=$op" --set "size=$size" --set "qps=$qps" --set "depth=$depth" \
    --set "signal=$signal" --set "iterations=$bw_n" --set "warmup=$((size <= 4096 ? bw_warmup_small : bw_n))"
}
pingpong_case() {
  local size=64 n=$((quick ? 1000 : 5000))
  run_case pingpong pingpong ibv_rc_pingpong -d "$DEV" -g "$GIDX" -s "$size" -n "$n" \
    -- -d "$DEV" -g "$GIDX" -s "$size" -n "$n" --warmup "$lat_warmup"
}
# What a user types (see the top): the same flags to both tools.
user_lat_case() { # SIZE
  local size=$1
  run_case "user_lat_$size" user_lat ib_send_lat -d "$DEV" -x "$GIDX" -s "$size" -n 20000 -F \
    -- "$SAMPLES/pingpong-lat.main.kts" -s "$size" -n 20000
}
user_bw_case() { # SIZE
  local size=$1
  run_case "user_bw_$size" user_bw ib_write_bw -d "$DEV" -x "$GIDX" -s "$size" -n 5000 -t 16 -F \
    -- "$SAMPLES/write-bw.main.kts" -s "$size" -n 5000 -t 16
}
user_pingpong_case() { # SIZE
  local size=$1
  run_case "user_pingpong_$size" user_pingpong ibv_rc_pingpong -d "$DEV" -g "$GIDX" -s "$size" -n 20000 \
    -- -d "$DEV" -g "$GIDX" -s "$size" -n 20000
}
# The sizes and counts are the scripts' own.
user_self_lat_case() {
  local size=64
  run_case user_self_lat user_self_lat ib_send_lat -d "$DEV" -x "$GIDX" -s 64 -n 20000 -F \
    -- "$SCENARIOS/self-lat.main.kts"
}
user_self_bw_case() {
  local size=65536
  run_case user_self_bw user_self_bw ib_write_bw -d "$DEV" -x "$GIDX" -s "$size" -n 5000 -t 16 -F \
    -- "$SCENARIOS/self-bw.main.kts"
}
cold_lat_case() { # SIZE
  local size=$1
  run_case "cold_lat_$size" cold_lat ib_send_lat -d "$DEV" -x "$GIDX" -s "$size" -n 1000 -F \
    -- "$SCENARIOS/lat.main.kts" --set op=send --set "size=$size" --set iterations=1000 --set warmup=0
}

say "perftest-compare on $DEV ($(nproc) vCPUs), $rounds round(s) per case, $(date -u +%Y-%m-%dT%H:%MZ)"
if ((quick)); then
  lat_case send 64
  bw_case write 65536 1
  user_lat_case 64
  user_pingpong_case 64
  user_self_lat_case
else
  for op in send write read; do for size in 2 64 4096; do lat_case "$op" "$size"; done; done
  for op in send write read; do for size in 4096 65536; do for qps in 1 4; do bw_case "$op" "$size" "$qps"; done; done; done
  bw_case atomic 8 1
  pingpong_case
  for size in 64 4096; do user_lat_case "$size"; done
  for size in 4096 65536; do user_bw_case "$size"; done
  user_pingpong_case 64
  user_self_lat_case
  user_self_bw_case
  cold_lat_case 64
fi
summary=""
for k in "${kinds[@]}"; do summary+=" ${k}_ratio=$(echo "${ratios[$k]-}" | median)"; done
say "${summary# }"
if [ -n "$against" ]; then
  summary=""
  for k in "${kinds[@]}"; do summary+=" against_${k}_ratio=$(echo "${against_ratios[$k]-}" | median)"; done
  say "${summary# }"
fi
say "jvm_runs=$jvm_runs jvm_crashes=$jvm_crashes"
exit $failed
