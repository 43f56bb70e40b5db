#!/usr/bin/env bash
# End-to-end suite on a real Soft-RoCE device: boots the Soft-RoCE VM ONCE (its boot costs
# 10-20 s under emulation) with the checkout shared read-write, and runs e2e/in-vm.sh there.
# Run on the host after the build (./mvnw -DskipTests package):
#
#   e2e/softroce-e2e.sh                  all cases
#   e2e/softroce-e2e.sh multiqp          some cases (names: see CASES in e2e/in-vm.sh)
#
# Environment: SOFTROCE_VM (default ../shared/softroce/softroce-vm.sh next to the checkout),
# E2E_VM_CPUS (guest vCPUs, default 1: see below), E2E_VMS (VMs run at once, default 1: each
# runs every Nth case, its logs in target/e2e/vm<K>/; CI runs 2, one per host core),
# E2E_VM_TIMEOUT (seconds for the whole VM run, default 3600), E2E_PROC_TIMEOUT and
# E2E_LISTEN_TIMEOUT (per process / per server start, passed into the VM), E2E_SCRIPT_TIMEOUT
# (--timeout of the scenario-script cases, default 90s),
# RDMA_RUN_JAVA_OPTS (passed to bin/rdma-run in the VM).
# Logs of every process: target/e2e/<case>/*.log (printed for failed cases).
# The VM runs a copy of the build taken at start (see below), so rebuilding meanwhile is safe.
# Exit status: in-vm.sh's (non-zero if any case failed); 124 if the VM timed out, 125 if it
# could not be set up, 2 if the checkout is not built.
set -euo pipefail

root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

vm=${SOFTROCE_VM:-$(dirname -- "$root")/shared/softroce/softroce-vm.sh}
vm_timeout=${E2E_VM_TIMEOUT:-3600} # 2,364 s on a quiet 2-core host (2026-11-28); CI hosts run up to 1.5x slower
# One vCPU: with two, QEMU's multi-threaded TCG occasionally runs JIT code that another vCPU is
# patching (nmethod entry barriers, tier transitions) and the guest JVM dies with SIGSEGV/SIGILL
# a few bytes into a compiled method (seen in C1-only and tiered JVMs, about one JVM in 20-30).
# A single vCPU has no such race.
vm_cpus=${E2E_VM_CPUS:-1}

if [ ! -x "$vm" ]; then
  echo "softroce-e2e: the Soft-RoCE VM script $vm is missing: set SOFTROCE_VM" >&2
  exit 2
fi
if [ ! -f samples/target/classpath.txt ]; then
  echo "softroce-e2e: the checkout is not built (samples/target/classpath.txt missing): run ./mvnw -DskipTests package first" >&2
  exit 2
fi
# Not fatal: the cases that need the launcher fail with their own message.
[ -f scripts/target/rdma-run.jar ] || echo "softroce-e2e: warning: scripts/target/rdma-run.jar is missing" >&2

. "$root/e2e/snapshot.sh"
snap=$(mktemp -d "${TMPDIR:-/tmp}/rdma-run-e2e.XXXXXX")
trap 'rm -rf "$snap"' EXIT
snapshot_build "$snap"
# The cases check for "compiled script cache hit".
warm_script_cache "$snap" "$snap"/samples/*.main.kts

# Logs go to the checkout (shared read-write with the VM by -C).
export E2E_LOG_DIR="$root/target/e2e"
env_args=(-e E2E_LOG_DIR -e RDMA_RUN_CACHE)
for v in E2E_PROC_TIMEOUT E2E_LISTEN_TIMEOUT E2E_SCRIPT_TIMEOUT RDMA_RUN_JAVA_OPTS; do
  if [ -n "${!v+x}" ]; then env_args+=(-e "$v"); fi
done

# verdict RC SUMMARY: what a VM run's status means, then its summary again, last and alone on its
# line (the VM's serial console can lose its tail).
verdict() {
  case $1 in
    124) echo "softroce-e2e: FAIL: the VM run exceeded ${vm_timeout} s and was killed (raise E2E_VM_TIMEOUT?)" ;;
    125) echo "softroce-e2e: FAIL: the Soft-RoCE VM could not be set up (see the console tail above)" ;;
  esac
  if [ "$1" != 124 ] && [ "$1" != 125 ] && [ -f "$2" ] && [ "$2" -nt "$snap" ]; then cat "$2"; fi
}

vms=${E2E_VMS:-1}
[ $# -gt 0 ] && [ $# -lt "$vms" ] && vms=$#
start=$SECONDS
if [ "$vms" -le 1 ]; then
  echo "softroce-e2e: starting the Soft-RoCE VM (timeout ${vm_timeout} s; running a snapshot of the build in $snap)"
  set +e
  "$vm" -C -c "$vm_cpus" -t "$vm_timeout" "${env_args[@]}" -- bash "$snap/e2e/in-vm.sh" "$@"
  rc=$?
  set -e
  echo "softroce-e2e: VM run took $((SECONDS - start)) s, exit status $rc"
  verdict "$rc" "$E2E_LOG_DIR/summary.txt"
  exit $rc
fi

# Several VMs from the one snapshot, each on its own share of the cases (E2E_PART=K/N, see
# in-vm.sh) and its own log folder; their consoles go to files, printed when all are done.
echo "softroce-e2e: starting $vms Soft-RoCE VMs (timeout ${vm_timeout} s each; running a snapshot of the build in $snap)"
rm -rf "$E2E_LOG_DIR" && mkdir -p "$E2E_LOG_DIR"
pids=()
for k in $(seq 1 "$vms"); do
  E2E_LOG_DIR="$E2E_LOG_DIR/vm$k" E2E_PART="$k/$vms" \
    "$vm" -C -c "$vm_cpus" -t "$vm_timeout" "${env_args[@]}" -e E2E_PART -- bash "$snap/e2e/in-vm.sh" "$@" \
    >"$E2E_LOG_DIR/vm$k.console" 2>&1 &
  pids+=($!)
done
rc=0
passed=0 failed=0
for k in $(seq 1 "$vms"); do
  vm_rc=0
  wait "${pids[$((k - 1))]}" || vm_rc=$?
  echo "softroce-e2e: ---- VM $k of $vms (console: target/e2e/vm$k.console), exit status $vm_rc"
  cat "$E2E_LOG_DIR/vm$k.console"
  verdict "$vm_rc" "$E2E_LOG_DIR/vm$k/summary.txt"
  read -r p _ f _ <"$E2E_LOG_DIR/vm$k/summary.txt" 2>/dev/null && passed=$((passed + p)) && failed=$((failed + f))
  [ "$vm_rc" = 0 ] || rc=$vm_rc
done
echo "softroce-e2e: $vms VMs took $((SECONDS - start)) s, exit status $rc"
echo "$passed passed, $failed failed"
exit $rc
