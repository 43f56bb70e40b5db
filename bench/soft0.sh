#!/usr/bin/env bash
# soft0's own speed against what the same machine does without rdma-run (figures for
# BENCHMARKS.md; not run by CI):
#
#   bench/soft0.sh [--rounds N] [--device DEV] [--cases REGEX]     (default: 3 rounds, soft0)
#
#   rtt      bench/scenarios/lat.main.kts op=send size=8, both peers in one JVM (--loopback: soft0's
#            in-memory transport), one way = round trip / 2, against Baselines pingpong (two Java
#            threads spinning on volatile fields). Goal: at most 3x. It also runs Soft0VerbsPingpong,
#            the same exchange on soft0's verbs with no engine, dispatcher or coroutine above them
#            (two threads posting 8 B inline SENDs and spinning on their CQs): soft0's own share.
#   tcp      bench/scenarios/bw.main.kts op=write size=65536 between two processes (soft0 over
#            loopback TCP), against Baselines tcp-source/tcp-sink (a plain TCP stream of 64 KiB
#            blocks between two processes). Goal: at least 0.5x.
#   qps_N    bw.main.kts op=write size=64 with N = 1, 2, 4, 8, 16 QPs on one dispatcher per side
#            (--loopback): the aggregate message rate, to show how the dispatcher scales.
#
# The two tools alternate round after round; every figure is a median over the rounds. The last
# line is `rtt_ratio= tcp_ratio=` (rdma-run / baseline). With --device rxe0 in the Soft-RoCE VM
# (softroce-vm.sh -C -c 2 -- bench/soft0.sh --device rxe0 --cases qps) it runs the scaling cases on
# rxe0. Build first: ./mvnw -DskipTests package.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3 device=soft0 only=.
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --device) device=${2:?--device needs a device}; shift ;;
    --cases) only=${2:?--cases needs a regular expression}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/soft0.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
cp="$root/bench/target/classpath.txt"
[[ -f $cp && -f $root/scripts/target/rdma-run.jar ]] || { echo "bench/soft0.sh: build first: ./mvnw -DskipTests package" >&2; exit 2; }
java=$( . "$root/bin/jdk.sh" >/dev/null && echo "$JAVA_HOME/bin/java")
baseline_of() { local main=$1; shift; "$java" --enable-native-access=ALL-UNNAMED -cp "$root/bench/target/classes:$(cat "$cp")" "dev.rdmarun.bench.$main" "$@"; }
baseline() { baseline_of Baselines "$@"; }
rr() { "$root/bin/rdma-run" "$@"; }
scenarios=$root/bench/scenarios
port=19400

# field NAME: the value of NAME=... in the last line of stdin that has it
field() { grep -o "$1=[0-9.]*" | tail -1 | cut -d= -f2; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

rtt_ratio=- tcp_ratio=-
if [[ rtt =~ $only ]] && [[ $device == soft0 ]]; then
  ours=() verbs=() theirs=()
  for ((r = 1; r <= rounds; r++)); do
    ours+=("$(rr "$scenarios/lat.main.kts" --loopback -d soft0 --set op=send --set size=8 --set iterations=100000 \
      --set warmup=200000 | field steady_us)")
    verbs+=("$(baseline_of Soft0VerbsPingpong 200000 100000 | field steady_us)")
    theirs+=("$(baseline pingpong 200000 100000 | field steady_us)")
  done
  a=$(printf '%s\n' "${ours[@]}" | median) v=$(printf '%s\n' "${verbs[@]}" | median) b=$(printf '%s\n' "${theirs[@]}" | median)
  rtt_ratio=$(ratio "$a" "$b")
  echo "rtt: soft0 (memory) ${a} us one way, two Java threads ${b} us: ${rtt_ratio}x (rounds: ${ours[*]} / ${theirs[*]})"
  echo "rtt_verbs: soft0's verbs alone ${v} us one way: $(ratio "$v" "$b")x the two threads, $(ratio "$v" "$a") of the scenario's (rounds: ${verbs[*]})"
fi

if [[ tcp =~ $only ]] && [[ $device == soft0 ]]; then
  ours=() theirs=()
  for ((r = 1; r <= rounds; r++)); do
    port=$((port + 1))
    rr "$scenarios/bw.main.kts" --listen "$port" -d soft0 --set op=write --set size=65536 --set iterations=5000 \
      --set warmup=2000 >/dev/null &
    server=$!
    ours+=("$(rr "$scenarios/bw.main.kts" --peer "127.0.0.1:$port" -d soft0 --set op=write --set size=65536 \
      --set iterations=5000 --set warmup=2000 | field steady_MBps)")
    wait "$server"
    port=$((port + 1))
    baseline tcp-sink "$port" &
    sink=$!
    until baseline_out=$(baseline tcp-source "$port" 65536 2000 5000 2>/dev/null); do sleep 0.2; done
    theirs+=("$(echo "$baseline_out" | field steady_MBps)")
    wait "$sink"
  done
  a=$(printf '%s\n' "${ours[@]}" | median) b=$(printf '%s\n' "${theirs[@]}" | median)
  tcp_ratio=$(ratio "$a" "$b")
  echo "tcp: soft0 over TCP ${a} MB/s, plain TCP stream ${b} MB/s: ${tcp_ratio}x (rounds: ${ours[*]} / ${theirs[*]})"
fi

for q in 1 2 4 8 16; do
  [[ qps_$q =~ $only ]] || continue
  runs=()
  for ((r = 1; r <= rounds; r++)); do
    runs+=("$(rr "$scenarios/bw.main.kts" --loopback -d "$device" --set op=write --set size=64 --set qps=$q \
      --set iterations=$((40000 / q)) --set warmup=$((40000 / q)) | field steady_MBps)")
  done
  a=$(printf '%s\n' "${runs[@]}" | median)
  echo "qps_$q: $device, $q QP(s), 64 B writes: $(awk -v m="$a" 'BEGIN {printf "%.3f", m / 64}') M msgs/s in all (rounds, MB/s: ${runs[*]})"
done
echo "rtt_ratio=$rtt_ratio tcp_ratio=$tcp_ratio"
