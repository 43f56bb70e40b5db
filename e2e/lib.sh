# Shared by the e2e suites (sourced, not run): process handling with bounded waits, checks, and
# the case loop. A suite sets root, LOGS, PROC_TIMEOUT, LISTEN_TIMEOUT and CASES, defines
# case_<name> functions, may define suite_header and before_case/after_case hooks (the VM suite
# compares resource counts there; a hook may set case_note for the PASS line), and ends with
# `run_cases "$@"`.

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# The JDK 25 java: $E2E_JAVA, else the one bin/jdk.sh selects.
e2e_java() {
  if [ -n "${E2E_JAVA-}" ]; then echo "$E2E_JAVA"; return; fi
  ( . "$root/bin/jdk.sh" >/dev/null && echo "$JAVA_HOME/bin/java" )
}

# Java command line for the runtime-level samples: compiled classes plus the classpath Maven
# wrote at build time (samples/pom.xml, maven-dependency-plugin build-classpath). Serial GC and
# C1 only: these samples are functional tests, not benchmarks, and start faster so.
sample_java() {
  local cpfile="$root/samples/target/classpath.txt" java
  if [ ! -f "$cpfile" ] || [ ! -d "$root/samples/target/classes" ]; then
    echo "samples not built: $cpfile missing (run ./mvnw -DskipTests package on the host)" >&2
    return 1
  fi
  java=$(e2e_java) || return 1
  echo "$java --enable-native-access=ALL-UNNAMED -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp $root/samples/target/classes:$(cat "$cpfile")"
}

# start NAME CMD...: runs CMD in the background under timeout, output to $case_dir/NAME.log;
# sets pid_NAME.
start() {
  local name=$1; shift
  echo "+ $*" >"$case_dir/$name.log"
  timeout -k 5 "$PROC_TIMEOUT" "$@" >>"$case_dir/$name.log" 2>&1 &
  printf -v "pid_$name" '%s' "$!"
}

# finish NAME: waits for it; sets rc_NAME and records it in the log.
finish() {
  local name=$1 pidvar="pid_$1" rc
  # 2>/dev/null: bash's "Killed" job notice for a case that SIGKILLs a peer (the log says it).
  wait "${!pidvar}" 2>/dev/null
  rc=$?
  printf -v "rc_$name" '%s' "$rc"
  echo "[exit status $rc$([ "$rc" = 124 ] && echo ": killed by timeout after ${PROC_TIMEOUT} s")]" >>"$case_dir/$name.log"
}

# run NAME CMD...: start + finish.
run() {
  local name=$1
  start "$@"
  finish "$name"
}

# wait_listen PORT NAME: until something listens on TCP PORT; fails early if NAME's process
# exits first (it failed to start), and after LISTEN_TIMEOUT s.
wait_listen() {
  local port=$1 name=$2 pidvar="pid_$2" t0=$SECONDS
  while :; do
    if [ -n "$(ss -ltnH "sport = :$port" 2>/dev/null)" ]; then return 0; fi
    if ! kill -0 "${!pidvar}" 2>/dev/null; then
      why="$name exited before listening on TCP port $port"
      return 1
    fi
    if [ $((SECONDS - t0)) -ge "$LISTEN_TIMEOUT" ]; then
      why="$name did not listen on TCP port $port within $LISTEN_TIMEOUT s"
      return 1
    fi
    sleep 0.2
  done
}

# Kill what a failed case left running (only our own background jobs).
reap() {
  local p
  for p in $(jobs -p); do kill -- "$p" 2>/dev/null; done
  wait 2>/dev/null
}

# expect_rc NAME WANT: fails the case (sets why) unless NAME exited with WANT.
expect_rc() {
  local rcvar="rc_$1"
  if [ "${!rcvar}" != "$2" ]; then
    why="${why:+$why; }$1 exited with ${!rcvar}, expected $2"
    return 1
  fi
}

# expect_pair RC TEXT: the processes named server and client both exited RC and printed TEXT.
expect_pair() {
  local side ok=0
  for side in server client; do
    expect_rc "$side" "$1" || ok=1
    expect_log "$side" "$2" || ok=1
  done
  return $ok
}

# expect_pair_ok TEXT: both exited 0 and printed TEXT.
expect_pair_ok() {
  expect_pair 0 "$1"
}

# expect_log NAME TEXT: fails the case unless NAME's log contains TEXT (fixed string).
expect_log() {
  if ! grep -qF -- "$2" "$case_dir/$1.log"; then
    why="${why:+$why; }$1 did not print '$2'"
    return 1
  fi
}

# expect_no_log NAME TEXT: fails the case if NAME's log contains TEXT (fixed string).
expect_no_log() {
  if grep -qF -- "$2" "$case_dir/$1.log"; then
    why="${why:+$why; }$1 printed '$2'"
    return 1
  fi
}

# wait_log NAME TEXT: until NAME's log contains TEXT; fails if NAME exits first or after PROC_TIMEOUT s.
wait_log() {
  local name=$1 text=$2 pidvar="pid_$1" t0=$SECONDS
  until grep -qF -- "$text" "$case_dir/$name.log"; do
    if ! kill -0 "${!pidvar}" 2>/dev/null || [ $((SECONDS - t0)) -ge "$PROC_TIMEOUT" ]; then
      why="${why:+$why; }$name never printed '$text'"
      return 1
    fi
    sleep 0.2
  done
}

# java_pid NAME: the JVM of NAME, a `timeout ... bin/rdma-run` started by start (bin/rdma-run execs java).
java_pid() {
  local pidvar="pid_$1"
  pgrep -P "${!pidvar}" | head -n 1
}

# note TEXT: a line printed under the case's PASS line (numbers worth seeing in the summary).
note() {
  echo "$*" >>"$case_dir/notes"
}

# True when the kernel lists an RDMA device (libibverbs' view, as rdma-run's DeviceList has it).
rdma_kernel_devices_present() {
  command -v ibv_devices >/dev/null && ibv_devices 2>/dev/null | awk 'NR > 2 && NF' | grep -q .
}

passed=0
failed=0

run_case() {
  local name=$1 t0 ok=1 f
  case_dir="$LOGS/$name"
  mkdir -p "$case_dir"
  why=
  case_note=
  echo "--- $name"
  t0=$(now)
  if declare -F before_case >/dev/null && ! before_case; then
    failed=$((failed + 1))
    echo "FAIL $name: ${why:-could not prepare the case}"
    return
  fi
  "case_$name" || ok=0
  reap
  if declare -F after_case >/dev/null; then after_case || ok=0; fi
  if [ "$ok" = 1 ]; then
    passed=$((passed + 1))
    echo "PASS $name ($(elapsed "$t0") s${case_note:+; $case_note})"
    [ -f "$case_dir/notes" ] && sed 's/^/    /' "$case_dir/notes"
  else
    failed=$((failed + 1))
    echo "FAIL $name ($(elapsed "$t0") s): ${why:-the case failed}"
    for f in "$case_dir"/*.log; do
      [ -f "$f" ] || continue
      echo "    ---- $(basename "$f")"
      sed 's/^/    | /' "$f" | tail -n 60
    done
  fi
}

# run_cases [NAME...]: the named cases (default: all of CASES), then the summary line; exit status.
run_cases() {
  local selected=("$@") c t_all
  [ ${#selected[@]} -eq 0 ] && selected=("${CASES[@]}")
  for c in "${selected[@]}"; do
    if ! declare -F "case_$c" >/dev/null; then
      echo "unknown case '$c'; cases: ${CASES[*]}"
      exit 2
    fi
  done
  rm -rf "$LOGS" && mkdir -p "$LOGS" || { echo "cannot create log dir $LOGS"; exit 2; }
  if declare -F suite_header >/dev/null; then suite_header; fi
  t_all=$(now)
  for c in "${selected[@]}"; do run_case "$c"; done
  echo "e2e done in $(elapsed "$t_all") s; logs in $LOGS"
  if [ $((passed + failed)) -ne ${#selected[@]} ]; then
    # A case that crashed the shell's loop (a bug in a suite) must not look like success.
    echo "FAIL: only $((passed + failed)) of ${#selected[@]} cases reported a result"
    failed=$((${#selected[@]} - passed))
  fi
  echo "$passed passed, $failed failed" | tee "$LOGS/summary.txt"
  [ "$failed" -eq 0 ]
}

# expect_interval_sums FILE: in the results document FILE (--json, with --interval), every run's interval
# records add up to its end.total, exactly (bytes both ways, work requests, messages); awk, so
# that it needs nothing the VM may lack. Relies on kotlinx's pretty printing: a field per line.
expect_interval_sums() {
  local out
  out=$(awk '
    function field(line) { sub(/.*: /, "", line); sub(/,$/, "", line); return line + 0 }
    /"role": "(server|client)"/ { role = $0; gsub(/.*: "|",?$/, "", role) }
    /"intervals": \[/ { state = "iv"; n = 0; split("", sum) }
    state == "iv" && /"startSeconds"/ { n++ }
    /"end": \{/ { state = "end" }
    state == "end" && /"total": \{/ { state = "total" }
    (state == "iv" || state == "total") && /"(bytesSent|bytesReceived|operations|messagesReceived)":/ {
      name = $0; gsub(/^ *"|":.*$/, "", name)
      if (state == "iv") sum[name] += field($0); else total[name] = field($0)
    }
    state == "total" && /^ *}/ {
      state = ""
      for (k in total) if (sum[k] + 0 != total[k]) printf "%s: intervals hold %d %s, the total %d; ", role, sum[k], k, total[k]
      if (n == 0) printf "%s: no interval records; ", role
    }' "$1")
  if [ -n "$out" ]; then
    why="${why:+$why; }$(basename "$1"): $out"
    return 1
  fi
}
