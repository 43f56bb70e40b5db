#!/usr/bin/env bash
# End-to-end cases on a real Soft-RoCE device. Runs INSIDE the VM that e2e/softroce-e2e.sh
# starts (it needs rxe0 and the SOFTROCE_* variables); the checkout must be built already.
#
#   e2e/in-vm.sh                 all cases
#   e2e/in-vm.sh multiqp gids    only the cases whose names are given (see CASES below)
#   E2E_PART=2/3 e2e/in-vm.sh    the second of every three of them (one VM of several)
#
# Every case prints one "PASS name" or "FAIL name: why" line (with the logs of its processes
# on failure); the last line is "N passed, M failed"; the exit status is non-zero if any failed.
# e2e/softroce-e2e.sh runs this script from a snapshot of the build (bin/, e2e/, the jars and
# classes), so $root below may be that snapshot; the logs go to $E2E_LOG_DIR.
# Every process gets a `timeout`, every wait is bounded: nothing here can hang.
# Around every case the rdma resource counts of the device (pd cq qp mr) are compared: a case
# that leaves more (or fewer) verbs objects behind fails. The multiqp case also checks that each
# sample process, still alive after closing its objects (--hold), owns none in the kernel.
set -uo pipefail

root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
# shellcheck source=e2e/lib.sh
. "$root/e2e/lib.sh"
. "$root/e2e/rank-addresses.sh"

DEV=${SOFTROCE_DEV:-rxe0}
IP=${SOFTROCE_IP:-10.77.0.1}
GIDX=${SOFTROCE_GID_INDEX:-1}
JAVA=$(e2e_java) || exit 2
RDMA_RUN="$root/bin/rdma-run"
LOGS=${E2E_LOG_DIR:-$root/target/e2e}
# The guest sees the host's home read-only: the per-user secret both peers share lives with the logs.
export XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-$LOGS/config}"
# Per-process bound (seconds). ibv_rc_pingpong's 1000 round trips take 0.3-8 s in the VM; the
# JVM adds 2-5 s of start-up under TCG. Generous, because the VM's speed varies a lot.
PROC_TIMEOUT=${E2E_PROC_TIMEOUT:-240}
LISTEN_TIMEOUT=${E2E_LISTEN_TIMEOUT:-90}

# bin/rdma-run in the VM: serial GC and C1 only unless the caller chose (even empty) options;
# the cases check behaviour, not speed, and the VM's JVM start-up is slow enough as it is.
: "${RDMA_RUN_JAVA_OPTS=-XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
export RDMA_RUN_JAVA_OPTS

# In this order E2E_VMS=2 (CI) gives each VM half of the time: every other case (890 and 889 s
# of cases in a clean-clone rehearsal of .ci/run, 2026-11-29).
CASES=(runtime_device_tests multiqp_bad_peer dsl_device_tests script_multi_qp devices script_card gids
       script_pingpong_lat pingpong_server script_write_bw pingpong_client script_loopback multiqp
       script_progress multiqp_mismatch script_peer_killed script_atomics script_link_down
       script_interrupted script_memlock script_figures ranks_alltoall)

# ---- helpers ----


# "pd N cq N qp N mr N" of $DEV from `rdma resource show`, e.g. "pd 1 cq 1 qp 1 mr 0".
resources() {
  rdma resource show 2>/dev/null | awk -v dev="$DEV" '
    { for (i = 1; i <= NF; i++) if ($i == dev ":") found = 1 }
    found {
      for (i = 1; i < NF; i++) v[$i] = $(i + 1)
      printf "pd %s cq %s qp %s mr %s\n", v["pd"], v["cq"], v["qp"], v["mr"]
      exit
    }'
}

# released NAME: waits (bounded by the process's life) until NAME, a MultiQpRuntime run with
# --hold, says it closed its verbs objects, then fails the case if `rdma resource show` still
# lists a PD, CQ, QP, MR or context of that live process. (Counting after exit would not see
# a missing close: the kernel frees everything of a process that exits.)
released() {
  local name=$1 pidvar="pid_$1" jpid kind left t0=$SECONDS
  until grep -q "verbs objects closed; holding" "$case_dir/$name.log"; do
    if ! kill -0 "${!pidvar}" 2>/dev/null || [ $((SECONDS - t0)) -ge "$PROC_TIMEOUT" ]; then
      why="${why:+$why; }$name never reported its verbs objects closed"
      return 1
    fi
    sleep 0.2
  done
  jpid=$(pgrep -P "${!pidvar}" | head -n 1)
  if [ -z "$jpid" ]; then
    why="${why:+$why; }$name exited before its resources could be checked (raise --hold)"
    return 1
  fi
  left=
  for kind in ctx pd cq qp mr; do
    left+=$(rdma resource show "$kind" 2>/dev/null | grep -E "(^| )pid $jpid( |\$)" | sed "s/^/$kind: /")
  done
  if [ -n "$left" ]; then
    why="${why:+$why; }$name (pid $jpid) still holds verbs objects after closing them: $left"
    return 1
  fi
  echo "$name (pid $jpid): no verbs objects left after close" >>"$case_dir/checks.log"
}

# Around every case: the device's verbs object counts must be what they were (no leak).
before_case() {
  before=$(resources)
  [ -n "$before" ] || { why="cannot read the resource counts of $DEV (rdma resource show)"; return 1; }
}

after_case() {
  local i
  # Verbs objects are released when a process exits; give the kernel a moment if it lags.
  after=$(resources)
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$after" = "$before" ] && break
    sleep 0.5
    after=$(resources)
  done
  if [ "$after" != "$before" ]; then
    why="${why:+$why; }rdma resources of $DEV changed: before '$before', after '$after' (leak)"
    return 1
  fi
  case_note="$DEV resources before and after: $after"
}

suite_header() {
  echo "e2e in the Soft-RoCE VM: device $DEV, IP $IP, GID index $GIDX, kernel $(uname -r), $(nproc) vCPUs, build in $root"
  echo "$DEV resources at start: $(resources)"
  [ -x "$RDMA_RUN" ] || echo "note: $RDMA_RUN is missing: the rdma-run cases will fail"
  [ -f "$root/scripts/target/rdma-run.jar" ] || echo "note: scripts/target/rdma-run.jar is not built: the rdma-run cases will fail"
}

# ---- cases ----

# JVM flags of the device specs in the VM. Single-tier C2: under multi-threaded TCG the tiered
# JIT's patching of a C1 method's entry (made not entrant when its C2 version arrives) while
# another vCPU runs it was seen to crash the JVM (SIGILL/SIGSEGV a few bytes into C1 code, 3 runs
# of 6); C2 alone never did (0 of 4). C2 is also what the allocation checks rely on.
SPEC_JVM_FLAGS=(--enable-native-access=ALL-UNNAMED -XX:-TieredCompilation)

# device_specs MODULE JUNIT-SELECTION...: a module's compiled specs (target/test-classes) through
# the JUnit console launcher the build left in target/vm-tests, on $DEV. RDMA_RUN_REQUIRE_DEVICE=1
# turns "no device" into a failure, never a skip; at least one test must run, none may fail or skip.
device_specs() {
  local module=$1 t="$root/$1/target" cp; shift
  # A whole suite in one JVM: 60-150 s under TCG on a quiet host, and twice that on a loaded one.
  local PROC_TIMEOUT=$((PROC_TIMEOUT * 2))
  if [ ! -f "$t/vm-tests/junit-platform-console-standalone.jar" ] || [ ! -d "$t/test-classes" ]; then
    why="$module specs not built ($t/vm-tests, $t/test-classes): run ./mvnw package on the host"
    return 1
  fi
  # The console launcher brings its own JUnit; the modules come from this build ($root), not
  # from the checkout the classpath file names.
  cp="$t/classes:$t/test-classes:$root/runtime/target/classes:$(tr ':' '\n' <"$t/vm-tests/classpath.txt" \
    | grep -v -e /org/junit/ -e /opentest4j/ -e /apiguardian/ -e /runtime/target/ | paste -sd:)"
  run junit env RDMA_RUN_REQUIRE_DEVICE=1 RDMA_TEST_DEVICE="$DEV" RDMA_TEST_WAIT_SECONDS=20 "$JAVA" "${SPEC_JVM_FLAGS[@]}" \
    -jar "$t/vm-tests/junit-platform-console-standalone.jar" execute --disable-banner --disable-ansi-colors \
    --details=tree -cp "$cp" "$@" --fail-if-no-tests
  expect_rc junit 0 || return 1
  grep -qE '\[ +0 tests failed' "$case_dir/junit.log" || { why="$module device specs failed"; return 1; }
  grep -qE '\[ +0 tests skipped' "$case_dir/junit.log" || { why="$module device specs were skipped"; return 1; }
  note "$(grep -E 'tests successful' "$case_dir/junit.log" | tr -s ' []' ' ' | sed 's/^ //')"
}

# The runtime's conformance suite on the native provider (JUnit, @Tag("rdma")): the same cases
# soft0 passes in every build (state machine, send/recv/imm, RNR and flush, WRITE/READ/atomics
# and access errors, close order), and the dispatcher in every idle mode with its allocation check.
case_runtime_device_tests() {
  device_specs runtime --scan-classpath "$root/runtime/target/test-classes" --include-tag rdma
}

# The DSL's scenario specs (kotest) on $DEV: every operation kind, credits under rnr_retry 0 in
# each completion mode, scripts that branch on the role, the QP index and received data, inline
# sends under signalEvery, 8 QPs on one word, a missing remoteAccess, the waits that end with a
# sentence (unanswered receive, both sides receiving, a full inbox), the card, a failure on one
# side, atomics in flight each with its own old value, 10,000 send(bytes) unchanged by later calls,
# 300 writes posted past what a QP remembers, bufferReuse(FAIL). The same spec runs on soft0 in
# every build.
case_dsl_device_tests() {
  device_specs dsl --select-class dev.rdmarun.dsl.DeviceScenarioSpec
}

# a. `rdma-run devices` lists the device like ibv_devices: its name and node GUID.
case_devices() {
  run devices "$RDMA_RUN" devices
  run ibv_devices ibv_devices
  expect_rc devices 0 || return 1
  local guid
  guid=$(awk -v dev="$DEV" '$1 == dev { print $2 }' "$case_dir/ibv_devices.log")
  # Tolerant: a line naming the device that also shows its GUID (with or without ':').
  if ! tr -d ':' <"$case_dir/devices.log" | grep -v '^+ ' | grep -w -- "$DEV" | grep -qi -- "${guid:-no-guid}"; then
    why="no line of 'rdma-run devices' shows $DEV with its node GUID ${guid:-?} (from ibv_devices)"
    return 1
  fi
}

# a. `rdma-run gids -d DEV` shows the RoCE v2 IPv4 GID like show_gids: a line with the device,
# port 1, the index, v2 and the IPv4 address.
case_gids() {
  run gids "$RDMA_RUN" gids -d "$DEV"
  expect_rc gids 0 || return 1
  if ! grep -v '^+ ' "$case_dir/gids.log" | awk -v dev="$DEV" -v idx="$GIDX" -v ip="$IP" '
      index($0, dev) && index($0, "v2") && index($0, ip) {
        port = 0; gidx = 0
        for (i = 1; i <= NF; i++) { if ($i == "1") port = 1; if ($i == idx) gidx = 1 }
        if (port && gidx) ok = 1
      }
      END { exit !ok }'; then
    why="no line of 'rdma-run gids -d $DEV' has $DEV, port 1, index $GIDX, RoCE v2 and $IP"
    return 1
  fi
}

# b. rdma-run pingpong server, ibv_rc_pingpong client (1000 iterations, the default).
case_pingpong_server() {
  local port=18621
  start server "$RDMA_RUN" pingpong -d "$DEV" -g "$GIDX" -p "$port"
  wait_listen "$port" server || return 1
  run client ibv_rc_pingpong -d "$DEV" -g "$GIDX" -p "$port" "$IP"
  finish server
  local ok=0
  expect_rc server 0 || ok=1
  expect_rc client 0 || ok=1
  expect_log client "1000 iters in" || ok=1
  return $ok
}

# b. ibv_rc_pingpong server, rdma-run pingpong client.
case_pingpong_client() {
  local port=18622
  start server ibv_rc_pingpong -d "$DEV" -g "$GIDX" -p "$port"
  wait_listen "$port" server || return 1
  run client "$RDMA_RUN" pingpong -d "$DEV" -g "$GIDX" -p "$port" "$IP"
  finish server
  local ok=0
  expect_rc server 0 || ok=1
  expect_rc client 0 || ok=1
  expect_log server "1000 iters in" || ok=1
  return $ok
}

# c. The runtime-level multi-QP sample, two processes: 4 RC QPs on one shared CQ each.
case_multiqp() {
  local port=18631 java
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086 # $java is a command line on purpose
  start server $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -g "$GIDX" -q 4 --hold 8
  wait_listen "$port" server || return 1
  # shellcheck disable=SC2086
  start client $java dev.rdmarun.samples.MultiQpRuntime --connect "$IP:$port" -d "$DEV" -g "$GIDX" -q 4 --hold 8
  local ok=0
  released client || ok=1
  released server || ok=1
  finish client
  finish server
  expect_pair_ok "PASS: 4 QPs, 4 send + 4 recv completions, all payloads verified" || ok=1
  return $ok
}

# c'. Both sides refuse a QP count mismatch with the same clear sentence, and exit 1.
case_multiqp_mismatch() {
  local port=18632 java
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086
  start server $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -g "$GIDX" -q 4
  wait_listen "$port" server || return 1
  # shellcheck disable=SC2086
  run client $java dev.rdmarun.samples.MultiQpRuntime --connect "$IP:$port" -d "$DEV" -g "$GIDX" -q 2
  finish server
  local ok=0
  expect_rc server 1 || ok=1
  expect_rc client 1 || ok=1
  expect_log server "remote has 2 QPs, this side 4" || ok=1
  expect_log client "remote has 4 QPs, this side 2" || ok=1
  return $ok
}

# c''. A peer that is not the sample (HTTP-ish garbage), then one that closes at once: the
# server fails with a clear sentence each time instead of hanging or crashing.
case_multiqp_bad_peer() {
  local port=18633 java ok=0
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086
  start server $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -g "$GIDX" -t 20
  wait_listen "$port" server || return 1
  run garbage timeout 30 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3 >/dev/null' "$IP" "$port"
  finish server
  expect_rc server 1 || ok=1
  expect_log server "the peer is not a rdma-run multi-QP sample: its first line is 'GET / HTTP/1.0'" || ok=1

  # shellcheck disable=SC2086
  start server2 $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -g "$GIDX" -t 20
  wait_listen "$port" server2 || return 1
  run closer timeout 30 bash -c 'exec 3<>"/dev/tcp/$0/$1" && exec 3>&-' "$IP" "$port"
  finish server2
  expect_rc server2 1 || ok=1
  expect_log server2 "the peer closed the TCP connection while this side waited for the peer's QP endpoints" || ok=1
  return $ok
}

# ---- scenario scripts: bin/rdma-run FILE.main.kts (samples/*.main.kts) ----

SAMPLES="$root/samples"
# A server waits --timeout for its client's hello once it listens. Under TCG the client's JVM
# start and setup take 30-60 s on a quiet host and were seen past 90 s on a loaded one (the server
# then gave up first): no case waits for this timeout to pass, so it is generous.
SCRIPT_TIMEOUT=${E2E_SCRIPT_TIMEOUT:-180s}
# For the cases that test something else: no pre-flight and no warm-up, which under TCG take 10 s
# and up to 30 s of each side (script_pingpong_lat keeps both, and script_figures its warm-up).
NO_WARMUP=(--set warmup=0 --set preflight=0)

# script_pair SAMPLE PORT [ARGS...]: the sample as two bin/rdma-run processes on $DEV, server
# (--listen) and client (--peer); both must succeed, print their results table, write it as
# JSON ($case_dir/SIDE.json), and take the compiled script from the cache that softroce-e2e.sh
# warmed on the host (no compiler here).
script_pair() {
  local sample=$1 port=$2 side ok=0
  shift 2
  start server "$RDMA_RUN" "$SAMPLES/$sample.main.kts" --listen "$port" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" --debug --json "$case_dir/server.json" "$@"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "$SAMPLES/$sample.main.kts" --peer "$IP:$port" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" --debug --json "$case_dir/client.json" "$@"
  finish client
  finish server
  for side in server client; do
    expect_rc "$side" 0 || ok=1
    expect_log "$side" "compiled script cache hit" || ok=1
    expect_no_log "$side" "rdma-run: compiling" || ok=1
    expect_log "$side" "$side on $DEV" || ok=1 # the results table
    expect_no_log "$side" " WRs, " || ok=1       # no progress line: the log is not a terminal
    if ! grep -q "\"role\": \"${side^^}\"" "$case_dir/$side.json" 2>/dev/null; then
      why="${why:+$why; }$side wrote no JSON results"
      ok=1
    fi
    note "$side: $(grep -E '^ *total ' "$case_dir/$side.log" | head -n 1 | tr -s ' ')"
  done
  return $ok
}

# The row of perftest's result block (the line under its ` #bytes` header) in a side's log, for the notes.
perftest_row() {
  grep -A1 '^ #bytes' "$case_dir/$1.log" | sed -n 2p | tr -s ' \t' ' '
}

case_script_multi_qp() {
  local ok=0 side
  script_pair multi-qp 18641 "${NO_WARMUP[@]}" || ok=1
  for side in server client; do
    expect_log "$side" "multi-qp: 4 QPs, one message each way, every payload verified" || ok=1
  done
  return $ok
}

# The design card verbatim (samples/card.main.kts) as two processes: each side's messages wait in
# the other's inbox, and each table counts them as not received.
case_script_card() {
  local ok=0 side
  script_pair card 18649 "${NO_WARMUP[@]}" || ok=1
  for side in server client; do
    expect_log "$side" "4000 messages arrived that no receive() took" || ok=1
  done
  return $ok
}

# The default warm-up: both sides run the same agreed rounds, then the measured 1000 exchanges.
case_script_pingpong_lat() {
  local ok=0 server_rounds client_rounds
  script_pair pingpong-lat 18642 || ok=1
  expect_log client "the latency above: rtt, one way" || ok=1 # perftest's latency block is rtt's
  server_rounds=$(grep -oE 'warm-up on QP 0: [0-9]+ rounds' "$case_dir/server.log" | head -n 1)
  client_rounds=$(grep -oE 'warm-up on QP 0: [0-9]+ rounds' "$case_dir/client.log" | head -n 1)
  if [ -z "$client_rounds" ] || [ "$server_rounds" != "$client_rounds" ]; then
    why="${why:+$why; }the sides did not report the same warm-up rounds ('$server_rounds', '$client_rounds')"
    ok=1
  fi
  note "client: $(perftest_row client); $(grep -F 'warm-up on QP 0' "$case_dir/client.log" | head -n 1 | tr -s ' ')"
  return $ok
}

case_script_write_bw() {
  local ok=0
  script_pair write-bw 18643 --set qps=2 --set iterations=400 --set signal=4 --set warmup=0 --set preflight=0 || ok=1
  expect_log client "$((2 * 400 * 65536))" || ok=1 # total bytes written: qps x iterations x size
  if ! grep -q "\"bytesSent\": $((2 * 400 * 65536))" "$case_dir/client.json"; then
    why="${why:+$why; }client.json does not have the bytes written"
    ok=1
  fi
  return $ok
}

# atomics.main.kts in two processes: awaited adds, then 4 in flight per QP, each with its own old value.
case_script_atomics() {
  local ok=0
  script_pair atomics 18645 --set qps=2 "${NO_WARMUP[@]}" || ok=1
  note "client: $(perftest_row client)"
  return $ok
}

# --loopback: server and client in one JVM, on the first device ($DEV here). The design card, and
# ring, the one sample no other case here runs on rxe0; every sample runs with --loopback on soft0
# in ScenarioCommandSpec, so more here would add only minutes of the emulated VM.
case_script_loopback() {
  local ok=0 kts name
  for kts in "$SAMPLES"/card.main.kts "$SAMPLES"/ring.main.kts; do
    name=$(basename "$kts" .main.kts | tr -c 'A-Za-z0-9_\n' _) # a process name is part of variable names
    run "$name" "$RDMA_RUN" "$kts" --loopback --debug --set warmup=0 --set preflight=0 # the warm-up has cases of its own
    expect_rc "$name" 0 || ok=1
    expect_log "$name" "compiled script cache hit" || ok=1
    expect_log "$name" "loopback on $DEV: server and client succeeded" || ok=1
    note "$name: $(grep -F 'loopback on' "$case_dir/$name.log" | head -n 1)"
  done
  return $ok
}

# On a terminal (a pty from script(1)) a run longer than a second shows a live progress line,
# redrawn in place with \r, with a percentage and an ETA; the results table follows it.
case_script_progress() {
  local ok=0
  # script(1) without a terminal of its own gives the pty no size: set one, as a terminal would.
  run tty script -qefc "stty cols 150 rows 40; exec $RDMA_RUN $SAMPLES/write-bw.main.kts --loopback --set seconds=4 --set warmup=0 --set preflight=0" /dev/null
  expect_rc tty 0 || ok=1
  if ! grep -qE $'\r(server|client) [0-9.]+ s: .* out, .* WRs, [0-9]+ msgs' "$case_dir/tty.log"; then
    why="${why:+$why; }no progress line on the terminal"
    ok=1
  fi
  # --set seconds: the line knows the run's length, so it shows how far it is and what is left.
  if ! grep -qE $'[0-9]+% \\(ETA [0-9.]+ s\\)' "$case_dir/tty.log"; then
    why="${why:+$why; }no percentage and ETA in the progress line"
    ok=1
  fi
  expect_log tty "loopback on $DEV: server and client succeeded" || ok=1
  note "$(tr '\r' '\n' <"$case_dir/tty.log" | grep -E '^(server|client) [0-9.]+ s: ' | grep -v ' 0.00 Gb/s' | tail -n 1)"
  return $ok
}

# A client killed (SIGKILL) in the middle of write-bw: the server notices the lost control
# connection, tears its scenario down and exits 1 with that sentence, well within its --timeout
# (the closed connection tells at once; the timeout is for a peer that goes silent).
case_script_peer_killed() {
  local port=18646 ok=0 killed_at took
  local args=("$SAMPLES/write-bw.main.kts" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" --set seconds=300 "${NO_WARMUP[@]}")
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "$IP:$port"
  wait_log client "connected, running the scenario" || return 1
  sleep 2 # writing
  kill -KILL "$(java_pid client)"
  killed_at=$SECONDS
  finish client
  finish server
  took=$((SECONDS - killed_at))
  expect_rc server 1 || ok=1
  expect_log server "the client closed the control connection in the middle of the scenario" || ok=1
  if [ "$took" -gt 30 ]; then
    why="${why:+$why; }the server took $took s after the kill to exit"
    ok=1
  fi
  note "server exited $took s after the client was killed: $(grep -F 'control connection' "$case_dir/server.log" | head -n 1)"
  return $ok
}

# Ctrl-C (SIGINT): a server waiting for its client stops at once rather than after --timeout;
# a client in the middle of write-bw tears its scenario down and exits 130, and its server
# reports why and exits 1. The resource check around the case sees every object released.
case_script_interrupted() {
  local port=18647 ok=0 at took
  start waiting "$RDMA_RUN" "$SAMPLES/multi-qp.main.kts" --listen "$port" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" "${NO_WARMUP[@]}"
  wait_listen "$port" waiting || return 1
  sleep 2 # past the device setup, in accept
  kill -INT "$(java_pid waiting)"
  at=$SECONDS
  finish waiting
  took=$((SECONDS - at))
  expect_rc waiting 130 || ok=1
  expect_log waiting "interrupted" || ok=1
  if [ "$took" -gt 15 ]; then
    why="${why:+$why; }the waiting server took $took s to stop after SIGINT (--timeout $SCRIPT_TIMEOUT)"
    ok=1
  fi
  note "waiting server stopped $took s after SIGINT"

  port=18648
  local args=("$SAMPLES/write-bw.main.kts" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" --set seconds=300 "${NO_WARMUP[@]}")
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "$IP:$port"
  wait_log client "connected, running the scenario" || return 1
  sleep 2
  kill -INT "$(java_pid client)"
  at=$SECONDS
  finish client
  finish server
  took=$((SECONDS - at))
  expect_rc client 130 || ok=1
  expect_log client "interrupted" || ok=1
  expect_rc server 1 || ok=1
  expect_log server "the client failed: the client was interrupted" || ok=1
  note "interrupted client and its server done $took s after SIGINT"
  return $ok
}

# The link under rxe0 goes down in the middle of write-bw: the device fails the work requests,
# each side ends with one sentence (naming the port's state) and exit 1 within its deadline, and
# (after the link is back) no verbs object is left behind.
case_script_link_down() {
  local port=18650 ok=0 at took side netdev=${SOFTROCE_NETDEV:-dummy0}
  local args=("$SAMPLES/write-bw.main.kts" -d "$DEV" -g "$GIDX" --timeout "$SCRIPT_TIMEOUT" --set seconds=300 "${NO_WARMUP[@]}")
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "$IP:$port"
  wait_log client "connected, running the scenario" || return 1
  sleep 2 # writing
  ip link set "$netdev" down
  at=$SECONDS
  finish client
  finish server
  took=$((SECONDS - at))
  ip link set "$netdev" up
  wait_port_active || ok=1
  for side in server client; do
    expect_rc "$side" 1 || ok=1
    expect_no_log "$side" "Exception in thread" || ok=1
    expect_no_log "$side" "	at " || ok=1 # no stack trace without --debug
  done
  # rxe fails the next work request at once (LOC_QP_OP_ERR), often before the port's state says
  # DOWN: the hint names the link either way, and the sentence adds the state when it was seen.
  expect_log client "the link under the device went down" || ok=1
  expect_log server "the client failed: " || ok=1
  if [ "$took" -gt 150 ]; then
    why="${why:+$why; }the peers took $took s after the link went down to exit"
    ok=1
  fi
  note "link down: both exited 1 after $took s; client: $(grep -m1 'failed with' "$case_dir/client.log" | cut -c1-200)"
  return $ok
}

# wait_port_active: until $DEV's port is ACTIVE again (bounded).
wait_port_active() {
  local t0=$SECONDS
  until rdma link show "$DEV/1" 2>/dev/null | grep -q "state ACTIVE"; do
    if [ $((SECONDS - t0)) -ge 30 ]; then
      why="${why:+$why; }$DEV/1 did not come back ACTIVE"
      return 1
    fi
    sleep 0.5
  done
}

# Too little locked memory (root bypasses RLIMIT_MEMLOCK through CAP_IPC_LOCK, so the capability
# is dropped first): the memory registration fails, and the sentence says to raise the memlock
# limit; exit 1, nothing left registered.
case_script_memlock() {
  local ok=0
  run small setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock -- bash -c \
    "ulimit -l 64 && exec $RDMA_RUN $SAMPLES/write-bw.main.kts --loopback -d $DEV -g $GIDX --set size=1048576 --set iterations=10"
  expect_rc small 1 || ok=1
  expect_log small "the limit is 64 KiB" || ok=1
  expect_log small "ulimit -l" || ok=1
  expect_no_log small "	at " || ok=1
  note "memlock 64 KiB: $(grep -m1 'hint' "$case_dir/small.log" | cut -c1-160)"
  return $ok
}

# The figures on a device: write-bw with a warm-up whose last writes are in flight when it ends
# counts exactly the measured 500 writes of 4 KiB, and each side's intervals (the partial last one
# included) add up to its totals; read-lat's perftest latency block says #iterations 1000 (its reads).
case_script_figures() {
  local ok=0 side
  script_pair write-bw 18650 --set size=4096 --set iterations=500 --set warmup=100 --set preflight=0 --interval 0.2 || ok=1
  for side in server client; do expect_interval_sums "$case_dir/$side.json" || ok=1; done
  grep -q '"operations": 500,' "$case_dir/client.json" || { why="${why:+$why; }the client did not count 500 writes"; ok=1; }
  grep -q '"bytesSent": 2048000,' "$case_dir/client.json" || { why="${why:+$why; }the client did not count 2048000 bytes"; ok=1; }
  # Its warm-up (a fixed 200 rounds: the default one has its own case) is not among the 1000.
  script_pair read-lat 18651 --set warmup=200 --set preflight=0 || ok=1
  if ! grep -A1 '^ #bytes #iterations    t_min' "$case_dir/client.log" | grep -qE '^ *[0-9]+ +1000 '; then
    why="${why:+$why; }read-lat's client does not say #iterations 1000"
    ok=1
  fi
  return $ok
}

# ---- main ----

# Three ranks on one rxe0, each with its own address on the netdev and its own RoCE v2 GID (found
# by its address, never by a fixed index): rxe keeps traffic between its own addresses in its
# loopback path. All to all: 6 pair results (3 pairs, each side), every byte checked; the resource counts of rxe0 are the
# same before and after. Incast runs on soft0 under mpiexec (soft-e2e.sh) and on rxe0 in bench/.
case_ranks_alltoall() {
  local ok=0 k
  # Three JVMs on the one emulated vCPU: each takes 100-150 s to reach its scenario on a quiet host.
  local PROC_TIMEOUT=$((PROC_TIMEOUT * 2))
  if rank_addresses_add 3; then
    note "GID indices of 10.77.0.2-4: ${RANK_GIDX[*]}"
    for k in 0 1 2; do
      start "alltoall$k" "$RDMA_RUN" "$SAMPLES/alltoall.main.kts" -d "$DEV" -g "${RANK_GIDX[k]}" --timeout 240s \
        --rank "$k" --ranks 3 --rendezvous "10.77.0.2:18670" "${NO_WARMUP[@]}" --set iterations=200 --json "$case_dir/alltoall.json"
    done
    for k in 0 1 2; do finish "alltoall$k"; expect_rc "alltoall$k" 0 || ok=1; done
    for k in 0 1 2; do expect_log "alltoall$k" "alltoall: rank $k of 3 wrote to 2 ranks and checked what each wrote" || ok=1; done
    # Rank 0's JSON sums each rank's 2 pairs (and the 6 in all); rank 2's its own 2.
    [ "$(grep -c '"pairs": 2,' "$case_dir/alltoall.json")" = 3 ] && grep -q '"pairs": 6,' "$case_dir/alltoall.json" &&
      [ "$(grep -c '"pairs": 2,' "$case_dir/alltoall.rank2.json")" = 2 ] ||
      { why="${why:+$why; }the ranks' JSON does not sum their pairs"; ok=1; }
  else
    why=$RANK_WHY
    ok=1
  fi
  rank_addresses_del 3
  return $ok
}

# E2E_PART=K/N (softroce-e2e.sh with E2E_VMS=N): the Kth of every N cases, of those named or all.
if [ -n "${E2E_PART-}" ]; then
  part=${E2E_PART%/*} parts=${E2E_PART#*/} all=("$@")
  [ ${#all[@]} -eq 0 ] && all=("${CASES[@]}")
  set --
  for i in "${!all[@]}"; do
    [ $((i % parts)) -eq $((part - 1)) ] && set -- "$@" "${all[$i]}"
  done
  [ $# -gt 0 ] || { echo "in-vm: part $E2E_PART has no case"; exit 2; }
fi
run_cases "$@"
rc=$?
# The VM powers off right after this script: give the serial console time to drain its last
# lines (they were seen to be cut off). softroce-e2e.sh also reprints summary.txt.
sleep 1
exit $rc
