#!/usr/bin/env bash
# End-to-end cases on the software provider soft0, on this host (no RDMA needed): every case
# runs its peers as separate processes, which talk over soft0's TCP transport exactly as two
# machines without RDMA would. Run after the build (./mvnw -DskipTests package):
#
#   e2e/soft-e2e.sh              all cases
#   e2e/soft-e2e.sh pingpong     only the cases named (see CASES)
#
# Every case prints "PASS name" or "FAIL name: why" (with its processes' logs); the last line is
# "N passed, M failed"; the exit status is non-zero if any failed. Every process runs under
# `timeout`, so nothing here can hang. Logs: target/soft-e2e/<case>/*.log.
set -uo pipefail

root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
# shellcheck source=e2e/lib.sh
. "$root/e2e/lib.sh"
# shellcheck source=e2e/snapshot.sh
. "$root/e2e/snapshot.sh"

LOGS=${SOFT_E2E_LOG_DIR:-$root/target/soft-e2e}
PROC_TIMEOUT=${E2E_PROC_TIMEOUT:-180}
LISTEN_TIMEOUT=${E2E_LISTEN_TIMEOUT:-60}
RDMA_RUN="$root/bin/rdma-run"
DEV=soft0
CASES=(devices pingpong pingpong_other_secret multiqp multiqp_other_secret card_java script_multi_qp script_peer_killed script_atomics
       script_figures script_cache_copy ranks_plain ranks_mpirun ranks_hydra alltoall_mpirun incast_hydra alltoall_hydra alltoall_srun)

# `rdma-run devices` lists soft0, says it is software emulation, and (on a host whose kernel has
# no RDMA device) exits 1 with one line saying why.
case_devices() {
  run devices "$RDMA_RUN" devices
  grep -q "^    soft0 .*software emulation" "$case_dir/devices.log" || { why="soft0 is not listed as software emulation"; return 1; }
  if rdma_kernel_devices_present; then expect_rc devices 0; else expect_rc devices 1; fi
}

# rdma-run pingpong between two processes on soft0 (its TCP transport), 500 round trips after
# 200 that are not counted (--warmup on both sides).
case_pingpong() {
  local port=18741 ok=0
  start server "$RDMA_RUN" pingpong -d "$DEV" -p "$port" -n 500 --warmup 200 --peer-timeout 60
  wait_listen "$port" server || return 1
  run client "$RDMA_RUN" pingpong -d "$DEV" -p "$port" -n 500 --warmup 200 --peer-timeout 60 127.0.0.1
  finish server
  expect_pair_ok "500 iters in" || ok=1
  expect_log client "warm-up (not counted): 200 iters in" || ok=1
  return $ok
}

# pingpong peers with different secrets derive different soft0 fabric keys: no packet is
# accepted, and each side's peer timeout names the token, not the flags (the server waits
# longer: its first wait is for the client to connect).
case_pingpong_other_secret() {
  local port=18747
  start server env RDMA_RUN_TOKEN=server-secret "$RDMA_RUN" pingpong -d "$DEV" -p "$port" -n 50 --no-preflight --peer-timeout 15
  wait_listen "$port" server || return 1
  run client env RDMA_RUN_TOKEN=client-secret "$RDMA_RUN" pingpong -d "$DEV" -p "$port" -n 50 --no-preflight --peer-timeout 5 127.0.0.1
  finish server
  expect_pair 1 "after 0 of 50 sends and 0 of 50 receives (--peer-timeout); hint: no message of the peer arrived: on soft0 both sides need the same RDMA_RUN_TOKEN"
}

# The seeds' multi-QP flow at the runtime level, two processes: 4 RC QPs on one shared CQ each.
case_multiqp() {
  local port=18742 java ok=0
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086 # $java is a command line on purpose
  start server $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -q 4
  wait_listen "$port" server || return 1
  # shellcheck disable=SC2086
  run client $java dev.rdmarun.samples.MultiQpRuntime --connect "127.0.0.1:$port" -d "$DEV" -q 4
  finish server
  expect_pair_ok "PASS: 4 QPs, 4 send + 4 recv completions, all payloads verified" || ok=1
  return $ok
}

# The runtime-level sample derives soft0's fabric key from the secret both sides share and a
# nonce, never sending it: with different secrets ($RDMA_RUN_TOKEN) no packet is accepted and both
# sides fail; when the key travelled in the exchange, they passed.
case_multiqp_other_secret() {
  local port=18746 java
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086 # $java is a command line on purpose
  start server env RDMA_RUN_TOKEN=server-secret $java dev.rdmarun.samples.MultiQpRuntime --listen "$port" -d "$DEV" -q 2 -t 5
  wait_listen "$port" server || return 1
  # shellcheck disable=SC2086
  run client env RDMA_RUN_TOKEN=client-secret $java dev.rdmarun.samples.MultiQpRuntime --connect "127.0.0.1:$port" -d "$DEV" -q 2 -t 5
  finish server
  expect_pair 1 "FAIL: 2 QPs, 0 send + 0 recv completions"
}

# The design card from Java (RdmaJava: no suspend lambdas), two processes.
case_card_java() {
  local port=18745 java ok=0
  java=$(sample_java) || { why="samples not built"; return 1; }
  # shellcheck disable=SC2086 # $java is a command line on purpose
  start server $java dev.rdmarun.samples.CardJava --listen "$port" -d "$DEV" -n 200
  wait_listen "$port" server || return 1
  # shellcheck disable=SC2086
  run client $java dev.rdmarun.samples.CardJava --connect "127.0.0.1:$port" -d "$DEV" -n 200
  finish server
  expect_pair_ok "PASS: 804 work requests, 804 messages received" || ok=1
  return $ok
}

# script_pair SAMPLE PORT [ARGS...]: samples/SAMPLE.main.kts as a server and a client process on soft0.
script_pair() {
  local kts=$1 port=$2; shift 2
  local args=("$root/samples/$kts.main.kts" -d "$DEV" --timeout 60s "$@")
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  run client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  finish server
}

# The seeds' scenario as a script, two bin/rdma-run processes on soft0.
case_script_multi_qp() {
  local ok=0 side
  script_pair multi-qp 18743 || return 1
  for side in server client; do
    expect_rc "$side" 0 || ok=1
    expect_log "$side" "multi-qp: 4 QPs, one message each way, every payload verified" || ok=1
    expect_log "$side" "$side on soft0" || ok=1
  done
  return $ok
}

# A client killed (SIGKILL) in the middle of write-bw: the server notices the lost control
# connection and exits 1 with that sentence, long before its --timeout.
case_script_peer_killed() {
  local port=18744 ok=0
  local args=("$root/samples/write-bw.main.kts" -d "$DEV" --timeout 60s --set seconds=120)
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  wait_log client "connected, running the scenario" || return 1
  kill -KILL "$(java_pid client)"
  finish client
  finish server
  expect_rc server 1 || ok=1
  expect_log server "the client closed the control connection in the middle of the scenario" || ok=1
  return $ok
}

# samples/atomics.main.kts between two processes on soft0: 4 fetchAndAdd in flight per QP must
# each bring back its own old value (the sample fails on a value seen twice).
case_script_atomics() {
  local ok=0 side
  script_pair atomics 18746 --set qps=2 --set iterations=100 || return 1
  for side in server client; do
    expect_rc "$side" 0 || ok=1
  done
  return $ok
}

# write-bw as two processes, three times: a warm-up whose last 15 writes are still in flight when
# it ends is left out exactly (500 writes of 4 KiB counted), and each side's intervals, the last
# partial one included, add up to its totals.
case_script_figures() {
  local port=18747 ok=0 i side
  local args=("$root/samples/write-bw.main.kts" -d "$DEV" --timeout 60s -s 4096 -n 500 --set warmup=100 --interval 0.1)
  for i in 1 2 3; do
    start server "$RDMA_RUN" "${args[@]}" --listen "$port" --json "$case_dir/server-$i.json"
    wait_listen "$port" server || return 1
    run client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port" --json "$case_dir/client-$i.json"
    finish server
    expect_rc server 0 || ok=1
    expect_rc client 0 || ok=1
    for side in server client; do expect_interval_sums "$case_dir/$side-$i.json" || ok=1; done
    grep -q '"operations": 500,' "$case_dir/client-$i.json" || { why="${why:+$why; }run $i: the client did not count 500 writes"; ok=1; }
    grep -q '"bytesSent": 2048000,' "$case_dir/client-$i.json" || { why="${why:+$why; }run $i: the client did not count 2048000 bytes"; ok=1; }
  done
  return $ok
}

# A copy of the launcher, AOT cache included (as the VM suites run it), keys its compiled scripts
# on the copy's jars. The classes of an AOT cache keep the location of the training run, which
# must not stand for the jar that runs. One jar of the copy is changed where the AOT cache does
# not look (an entry's time stamp: same size, same file time), so the copy must compile again.
case_script_cache_copy() {
  local copy="$case_dir/copy" kts="$root/samples/card.main.kts" jar ok=0
  [ -f "$root/scripts/target/rdma-run.aot" ] || { why="the build made no AOT cache (scripts/target/rdma-run.aot)"; return 1; }
  launcher_copy "$copy" || return 1
  run first env RDMA_RUN_CACHE="$case_dir/cache" "$copy/bin/rdma-run" "$kts" --check
  expect_rc first 0 && expect_log first "compiling card.main.kts" || return 1
  jar=$(echo "$copy"/scripts/target/lib/rdma-dsl-*.jar)
  python3 - "$jar" <<'EOF' || { why="could not change $jar"; return 1; }
import os, struct, sys
path = sys.argv[1]
st = os.stat(path)
data = bytearray(open(path, "rb").read())
cd = struct.unpack_from("<I", data, data.rfind(b"PK\x05\x06") + 16)[0]  # the central directory
assert data[cd:cd + 4] == b"PK\x01\x02"
data[cd + 12] ^= 1  # the first entry's modification time, two seconds off
open(path, "r+b").write(data)
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
EOF
  run second env RDMA_RUN_CACHE="$case_dir/cache" RDMA_RUN_JAVA_OPTS=-Xlog:aot=info "$copy/bin/rdma-run" "$kts" --check
  expect_rc second 0 || ok=1
  expect_log second "Using AOT-linked classes: true" || { why="$why (without its AOT cache the case shows nothing)"; ok=1; }
  expect_log second "compiling card.main.kts" || { why="$why: the copy's changed jar did not change the cache key"; ok=1; }
  return $ok
}

# Two ranks given by hand (--rank K --ranks 2 --rendezvous): rank 0 is the server at the
# rendezvous, rank 1 its client; the two-peer sample runs unchanged.
case_ranks_plain() {
  local ok=0 side args=("$root/samples/multi-qp.main.kts" -d "$DEV" --timeout 60s --ranks 2 --rendezvous 127.0.0.1:18751)
  start server "$RDMA_RUN" "${args[@]}" --rank 0
  wait_listen 18751 server || return 1
  run client "$RDMA_RUN" "${args[@]}" --rank 1
  finish server
  expect_pair_ok "multi-qp: 4 QPs, one message each way, every payload verified" || ok=1
  expect_log server "rank 0 of 2 (--rank): the server, listen on *:18751" || ok=1
  expect_log client "rank 1 of 2 (--rank): the client, connect to 127.0.0.1:18751" || ok=1
  return $ok
}

# launcher_present COMMAND PACKAGE: true when COMMAND exists; else the case is skipped (a note),
# or fails under CI, where bin/setup --ci installs PACKAGE.
launcher_present() {
  command -v "$1" >/dev/null && return 0
  if [ -n "${CI-}" ]; then why="no $1 under CI (Debian's $2; bin/setup --ci installs it)"; return 1; fi
  case_note="skipped: no $1 (Debian's $2)"
  return 2
}

# ranks_by LAUNCHER NAME PORT CMD...: CMD starts 2 ranks of the multi-qp sample with -p PORT; each
# says its rank as LAUNCHER NAME numbers it, rank 1 meets rank 0 on this host (the launcher put
# every rank here), and both verify every payload.
ranks_by() {
  local name=$1 port=$2 ok=0; shift 2
  run ranks "$@" "$RDMA_RUN" "$root/samples/multi-qp.main.kts" -d "$DEV" --timeout 60s -p "$port"
  expect_rc ranks 0 || ok=1
  expect_log ranks "rank 0 of 2 ($name): the server, listen on *:$port" || ok=1
  expect_log ranks "rank 1 of 2 ($name): the client, connect to 127.0.0.1:$port" || ok=1
  if [ "$(grep -cF "every payload verified" "$case_dir/ranks.log")" != 2 ]; then
    why="${why:+$why; }not both ranks verified every payload"
    ok=1
  fi
  return $ok
}

# The same sample under Open MPI's mpirun, with no rank option: each process takes its rank from
# the launcher's variables (OMPI_COMM_WORLD_*).
case_ranks_mpirun() {
  launcher_present mpirun openmpi-bin || return $(($? == 2 ? 0 : 1))
  # Root in CI containers; every rank is local, so no remote agent (ssh) is needed.
  ranks_by "Open MPI" 18752 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false \
    mpirun --oversubscribe -np 2
}

# And under MPICH's mpiexec (Hydra: PMI_RANK, PMI_SIZE, MPI_LOCALNRANKS), named as Debian installs
# it beside Open MPI's.
case_ranks_hydra() {
  launcher_present mpiexec.hydra mpich || return $(($? == 2 ? 0 : 1))
  ranks_by "MPICH/Hydra" 18753 mpiexec.hydra -n 2
}

# samples_by SAMPLE N LINE PORT CMD...: CMD starts N ranks of SAMPLE (a run of ranks, met
# through rank 0 at PORT); every rank exits 0 and prints LINE's start, and rank 0 says the
# others came through the rendezvous.
samples_by() {
  local sample=$1 n=$2 line=$3 port=$4 ok=0; shift 4
  run ranks "$@" "$RDMA_RUN" "$root/samples/$sample.main.kts" -d "$DEV" --timeout 120s -p "$port" \
    --set warmup=0 --set preflight=0 --set iterations=200 --json "$case_dir/ranks.json"
  expect_rc ranks 0 || ok=1
  expect_log ranks "rank 0 of $n " || ok=1
  if [ "$(grep -cF "$line" "$case_dir/ranks.log")" != "$n" ]; then
    why="${why:+$why; }not every one of the $n ranks said '$line'"
    ok=1
  fi
  return $ok
}

# Eight ranks of the all-to-all sample under mpirun (8 JVMs on this host's cores: soft0 waits for a
# peer its host holds back rather than counting retries): every rank writes to the seven others at
# once and checks every byte each of them wrote (56 pairs' payloads); rank 0 sums up all 56 pairs.
# (Four ranks run under srun below, and three in the VM.)
case_alltoall_mpirun() {
  launcher_present mpirun openmpi-bin || return $(($? == 2 ? 0 : 1))
  samples_by alltoall 8 "wrote to 7 ranks and checked what each wrote" 18754 \
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false mpirun --oversubscribe -np 8 || return 1
  # Rank 0 gathered the 56 pairs' results: its summary and its JSON hold them all; rank K's own
  # JSON (ranks.rankK.json, not rank 0's file) its 7 pairs.
  expect_log ranks "ranks: 8, 56 pair results gathered on rank 0" || return 1
  python3 - "$case_dir" <<'PY' || { why="the ranks' JSON documents do not hold their pairs (see ranks.log)"; return 1; }
import json, sys
d = sys.argv[1]
pairs = lambda f: sorted((r["end"]["pair"]["rank"], r["end"]["pair"]["peerRank"]) for r in json.load(open(f"{d}/{f}"))["runs"])
assert pairs("ranks.json") == sorted((r, p) for r in range(8) for p in range(8) if r != p), pairs("ranks.json")
for k in range(1, 8):
    assert pairs(f"ranks.rank{k}.json") == [(k, p) for p in range(8) if p != k], k
# Schema 2: rank 0 sums every rank, rank K its own; each sum is of its pairs' runs, the total of the ranks.
for f, ranks in [("ranks.json", list(range(8)))] + [(f"ranks.rank{k}.json", [k]) for k in range(1, 8)]:
    doc = json.load(open(f"{d}/{f}"))
    assert doc["schema"] == 2, f
    s = doc["ranks"][0]["summary"]
    assert [t["rank"] for t in s["perRank"]] == ranks, (f, s["perRank"])
    for t in s["perRank"]:
        mine = [r["end"] for r in doc["runs"] if r["end"]["pair"]["rank"] == t["rank"]]
        assert t["pairs"] == len(mine) == 7, (f, t["rank"])
        for key in ("bytesSent", "bytesReceived", "operations"):
            assert t[key] == sum(e["total"][key] for e in mine), (f, t["rank"], key)
        assert t["latency"]["count"] == sum(e["total"]["latency"]["count"] for e in mine), (f, t["rank"])
    assert s["total"]["bytesSent"] == sum(t["bytesSent"] for t in s["perRank"]), f
PY
  # And the report draws its pair matrix.
  run report "$RDMA_RUN" report "$case_dir/ranks.json" -o "$case_dir/ranks.html"
  expect_rc report 0 || return 1
  grep -q 'id="pairs-0-0"' "$case_dir/ranks.html" || { why="the report of rank 0's JSON has no pair matrix"; return 1; }
}

# Four ranks of the incast sample under MPICH: three senders to rank 0, which checks who sent each
# message and receives exactly what the three sent (3 x 200 messages of 4096 bytes).
case_incast_hydra() {
  launcher_present mpiexec.hydra mpich || return $(($? == 2 ? 0 : 1))
  samples_by incast 4 "incast: rank" 18755 mpiexec.hydra -n 4 || return 1
  expect_log ranks "incast: rank 0 received 2457600 bytes from 3 senders, every message checked" || return 1
  # What rank 0 received is the sum of what the three senders say they sent.
  local sent
  sent=$(sed -n 's/^incast: rank [1-9][0-9]* sent \([0-9]*\) bytes to rank 0$/\1/p' "$case_dir/ranks.log" | awk '{ s += $1; n++ } END { print n, s }')
  [ "$sent" = "3 2457600" ] || { why="the senders said they sent (count, bytes): $sent, not 3 2457600"; return 1; }
}

# The all-to-all sample under MPICH's launcher too (every payload checked; rank 0's JSON holds the 12 pairs).
case_alltoall_hydra() {
  launcher_present mpiexec.hydra mpich || return $(($? == 2 ? 0 : 1))
  samples_by alltoall 4 "wrote to 3 ranks and checked what each wrote" 18759 mpiexec.hydra -n 4 || return 1
  expect_log ranks "ranks: 4, 12 pair results gathered on rank 0" || return 1
  [ "$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$case_dir/ranks.json")" = 12 ] ||
    { why="rank 0's ranks.json does not hold the 12 pairs"; return 1; }
}

# slurm_up DIR NODE: a one-node Slurm cluster of this host, named NODE, for one case: its own
# munged, slurmctld and slurmd (as root, no cgroups, ports 18757-18758, every file under DIR, the
# config at $SLURM_CONF), up once the node is idle. slurm_down stops whatever slurm_up started.
slurm_up() {
  local dir=$1 node=$2 t0=$SECONDS
  unset pid_munged pid_slurmctld pid_slurmd
  # munged wants a socket directory everyone may enter; --force: a group-writable checkout only warns.
  if ! { mkdir -p "$dir/state" "$dir/spool" && chmod 755 "$dir" && mungekey -c -k "$dir/munge.key"; }; then
    why="cannot prepare $dir for Slurm"
    return 1
  fi
  start munged munged -F --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" --log-file=/dev/null
  # The node's CPUs, sockets, cores and threads as slurmd finds them here (not its memory, which
  # would drain the node if it ever read less).
  cat >"$SLURM_CONF" <<EOF || return 1
ClusterName=e2e
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=18757
SlurmdPort=18758
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
MailProg=/bin/true
NodeName=$node NodeAddr=127.0.0.1 $(slurmd -C | sed -n '1{s/^NodeName=[^ ]* //;s/ RealMemory=.*//;p}') State=UNKNOWN
PartitionName=e2e Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  until munge -n -S "$dir/munge.sock" >/dev/null 2>&1; do
    running munged || return 1
    [ $((SECONDS - t0)) -lt 30 ] || { why="munged did not answer within 30 s"; return 1; }
    sleep 0.2
  done
  start slurmctld slurmctld -D
  start slurmd slurmd -D -N "$node"
  until [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ]; do
    running munged slurmctld slurmd || return 1
    [ $((SECONDS - t0)) -lt 30 ] || { why="Slurm's node $node was not idle within 30 s"; return 1; }
    sleep 0.2
  done
}

# running NAME...: each process NAME (from start) still runs; else why says which exited.
running() {
  local name pidvar
  for name in "$@"; do
    pidvar="pid_$name"
    kill -0 "${!pidvar}" 2>/dev/null || { why="$name exited as it started"; return 1; }
  done
}

slurm_down() {
  local name pidvar t0=$SECONDS
  # A job left by a failed run would keep its ranks (under slurmstepd) past slurmd: cancel it first.
  if kill -0 "${pid_slurmctld-}" 2>/dev/null && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
    scancel --full --partition=e2e 2>/dev/null
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $((SECONDS - t0)) -lt 20 ]; do sleep 0.2; done
  fi
  for name in slurmd slurmctld munged; do
    pidvar="pid_$name"
    [ -n "${!pidvar-}" ] || continue
    kill "${!pidvar}" 2>/dev/null
    finish "$name"
  done
}

# Four ranks of the all-to-all sample under Slurm's srun, in a cluster of this host that the case
# starts and stops: each rank takes its place from srun's step (SLURM_PROCID, SLURM_NTASKS) and
# meets rank 0 on the step's first node, this host by its name.
case_alltoall_srun() {
  local c node ok=0
  for c in srun:slurm-client slurmctld:slurmctld slurmd:slurmd munged:munge; do
    launcher_present "${c%%:*}" "${c#*:}" || return $(($? == 2 ? 0 : 1))
  done
  if [ "$(id -u)" != 0 ]; then
    [ -z "${CI-}" ] || { why="slurmd needs root"; return 1; }
    case_note="skipped: slurmd needs root"
    return 0
  fi
  node=$(hostname -s)
  getent hosts "$node" >/dev/null || { why="this host's name $node does not resolve (rank 0's address under Slurm)"; return 1; }
  local -x SLURM_CONF="$case_dir/slurm/slurm.conf"
  if slurm_up "$case_dir/slurm" "$node"; then
    # -O: 4 tasks on fewer CPUs; -t: Slurm's own limit, PROC_TIMEOUT in whole minutes.
    samples_by alltoall 4 "wrote to 3 ranks and checked what each wrote" 18756 \
      srun -n 4 -N 1 -O --kill-on-bad-exit=1 -t $(((PROC_TIMEOUT + 59) / 60)) \
      && expect_log ranks "ranks: 4, 12 pair results gathered on rank 0" || ok=1
  else
    ok=1
  fi
  slurm_down
  return $ok
}

run_cases "$@"
