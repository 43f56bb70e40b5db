# Sourced by the scripts that run the build in the Soft-RoCE VM (e2e/softroce-e2e.sh,
# bench/perftest-compare.sh): a snapshot of what the VM runs, and its warmed script cache; and by
# e2e/soft-e2e.sh for a copy of the launcher. Expects root (the checkout) to be set.

# launcher_copy DEST: the launcher (bin/) with the jars and the AOT cache the build left, as
# bin/rdma-run finds them relative to itself.
launcher_copy() {
  local dest=$1
  mkdir -p "$dest/scripts/target" && cp -a "$root/bin" "$dest/" || return 1
  [ -f "$root/scripts/target/rdma-run.jar" ] || return 0
  cp -a "$root/scripts/target/rdma-run.jar" "$dest/scripts/target/" || return 1
  # The launcher's AOT cache: it accepts the copy (same jars, same relative paths, same JDK).
  if [ -f "$root/scripts/target/rdma-run.aot" ]; then cp -a "$root/scripts/target/rdma-run.aot" "$dest/scripts/target/" || return 1; fi
  if [ -d "$root/scripts/target/lib" ]; then cp -a "$root/scripts/target/lib" "$dest/scripts/target/" || return 1; fi
}

# snapshot_build SNAP: copies the launcher, its jars, the scripts (samples, bench scenarios),
# the compiled samples and specs with their classpath, and these scripts into SNAP, a host temp
# dir the VM sees read-only: a rebuild in the checkout while the VM runs (minutes) then cannot
# pull class files from under the running cases.
snapshot_build() {
  local snap=$1 module d dep
  launcher_copy "$snap"
  mkdir -p "$snap/samples/target" "$snap/samples/lib" "$snap/bench"
  cp -a "$root/e2e" "$snap/"
  cp -a "$root"/samples/*.main.kts "$snap/samples/"
  cp -a "$root/bench/scenarios" "$root/bench/perftest-compare.sh" "$root/bench/incast.sh" "$snap/bench/"
  cp -a "$root/samples/target/classes" "$snap/samples/target/"
  for module in runtime dsl; do  # their compiled specs, run in the VM on rxe0
    mkdir -p "$snap/$module/target"
    for d in classes test-classes vm-tests; do
      [ -d "$root/$module/target/$d" ] && cp -a "$root/$module/target/$d" "$snap/$module/target/"
    done
  done
  local cp_entries=() deps=()
  IFS=: read -r -a deps <"$root/samples/target/classpath.txt" || true  # no trailing newline: status 1
  for dep in ${deps[@]+"${deps[@]}"}; do
    if [ -d "$dep" ]; then
      cp -a "$dep" "$snap/samples/lib/$(basename "$dep")-dir"
      cp_entries+=("$snap/samples/lib/$(basename "$dep")-dir")
    else
      cp -a "$dep" "$snap/samples/lib/"
      cp_entries+=("$snap/samples/lib/$(basename "$dep")")
    fi
  done
  (IFS=:; printf '%s' "${cp_entries[*]}") >"$snap/samples/target/classpath.txt"
}

# warm_script_cache SNAP SCRIPT...: compiling a scenario script takes minutes under TCG, so
# compile them here, with the snapshot's launcher and jars, into SNAP/script-cache (exported as
# RDMA_RUN_CACHE). The cache key is the script text and the jars' contents, so the VM's runs of
# the same snapshot hit these entries (read-only there, which is all a hit needs).
# vm_snapshot NAME: on the host, for a script NAME that runs itself in the VM: sets vm (the VM
# script; SOFTROCE_VM or ../shared's) and snap (a snapshot of the build, removed on exit), or
# exits 2 with one sentence when either is missing.
vm_snapshot() {
  vm=${SOFTROCE_VM:-$(dirname -- "$root")/shared/softroce/softroce-vm.sh}
  [ -x "$vm" ] || { echo "$1: the Soft-RoCE VM script $vm is missing: set SOFTROCE_VM" >&2; exit 2; }
  if [ ! -f "$root/scripts/target/rdma-run.jar" ] || [ ! -f "$root/samples/target/classpath.txt" ]; then
    echo "$1: the checkout is not built: run ./mvnw -DskipTests package first" >&2
    exit 2
  fi
  snap=$(mktemp -d "${TMPDIR:-/tmp}/rdma-run-bench.XXXXXX")
  trap 'rm -rf "$snap"' EXIT
  snapshot_build "$snap"
}

warm_script_cache() {
  local snap=$1 kts out warm_start=$SECONDS
  shift
  export RDMA_RUN_CACHE="$snap/script-cache"
  [ -f "$snap/scripts/target/rdma-run.jar" ] || return 0
  for kts in "$@"; do
    if ! out=$("$snap/bin/rdma-run" "$kts" --check 2>&1); then
      echo "warning: '$(basename "$kts") --check' failed on the host; its VM runs will fail:" >&2
      printf '%s\n' "$out" | sed 's/^/    /' >&2
    fi
  done
  echo "compiled-script cache warmed for $# scripts in $((SECONDS - warm_start)) s"
}
