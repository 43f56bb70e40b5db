#!/usr/bin/env bash
# The fault-and-attack suite on this host (soft0, no RDMA needed): a third process attacks soft0
# and the control connection while real peers run, and bad local input meets the launcher. Each
# case asserts the outcome SECURITY.md documents: the exit code, the sentence, that the peers'
# data is untouched, that the time to exit is bounded, that memory stays bounded and that
# nothing is left listening. Run after the build (./mvnw -DskipTests package):
#
#   e2e/hostile.sh               all cases
#   e2e/hostile.sh soft0_forge   only the cases named (see CASES)
#
# The attacker is e2e/attacker.py (python3, standard library). Every process runs under
# `timeout`; logs: target/hostile/<case>/*.log.
set -uo pipefail

root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
# shellcheck source=e2e/lib.sh
. "$root/e2e/lib.sh"

LOGS=${HOSTILE_LOG_DIR:-$root/target/hostile}
PROC_TIMEOUT=${E2E_PROC_TIMEOUT:-120}
LISTEN_TIMEOUT=${E2E_LISTEN_TIMEOUT:-60}
RDMA_RUN="$root/bin/rdma-run"
ATTACKER=(python3 "$root/e2e/attacker.py")
GUARDED="$root/e2e/hostile/guarded.main.kts"
CASES=(soft0_forge soft0_flood loopback_no_listener control_drip_server control_drip_client control_scan_and_stray
       control_token peer_text_escaped soft0_message_too_long bad_gid_before_client
       script_empty script_no_rdma script_binary script_not_utf8 script_many_errors script_exception script_system_exit
       script_busy_interrupted cache_planted_jar cache_open_folder cache_scripts_link
       control_echo_intro control_replay soft0_observer soft0_flood_first launcher_disagree rank_killed
       rendezvous_strays rendezvous_other_run)

# For the attacks on a waiting server: its listener exists before connect's pre-flight (up to 10 s),
# and a connection made meanwhile waits in its backlog for the server's first bytes, longer than an
# attacker's 5 s deadline on a slow host. The attacks, not the warm-up, are tested here.
NO_PREFLIGHT=(--set warmup=0 --set preflight=0)

# The TCP ports JVM pid $1 listens on, one per line.
listening_ports() {
  ss -ltnpH 2>/dev/null | awk -v pid="pid=$1," 'index($0, pid) { n = split($4, a, ":"); print a[n] }' | sort -u
}

# The address JVM pid $1 listens on at TCP port $2 (127.0.0.1 for a wildcard).
listening_address() {
  ss -ltnpH 2>/dev/null | awk -v pid="pid=$1," -v port="$2" 'index($0, pid) {
      n = split($4, a, ":"); if (a[n] != port) next
      addr = substr($4, 1, length($4) - length(port) - 1)
      gsub(/^\[|\]$/, "", addr); sub(/^::ffff:/, "", addr); sub(/%.*$/, "", addr)
      if (addr == "*" || addr == "0.0.0.0" || addr == "::") addr = "127.0.0.1"
      print addr; exit }'
}

# expect_no_secret NAME TEXT: NAME's output (not the command line the log starts with) lacks TEXT.
expect_no_secret() {
  if tail -n +2 "$case_dir/$1.log" | grep -qF -- "$2"; then
    why="${why:+$why; }$1 printed the secret '$2'"
    return 1
  fi
}

# Peak resident memory (VmHWM) of pid $1 in MiB.
peak_rss_mib() {
  awk '/^VmHWM:/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null
}

# guarded_pair PORT SECONDS: the guarded scenario as two processes on soft0, started; returns once
# both run the scenario (the client said so). Sets server_jvm, client_jvm.
guarded_pair() {
  local port=$1 seconds=$2
  local args=("$GUARDED" -d soft0 --timeout 30s --set "seconds=$seconds" --set warmup=0 --set preflight=0) # the attacks, not the warm-up, are tested here
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  wait_log client "connected, running the scenario" || return 1
  server_jvm=$(java_pid server)
  client_jvm=$(java_pid client)
}

# Both guarded peers exited 0 with their data intact.
expect_guarded_ok() {
  finish client
  finish server
  expect_pair_ok "the server's buffer intact"
}

# A third process speaks soft0's wire to every soft0 port of both peers while they run: forged
# READs and WRITEs for guessable QPNs and rkeys. It must get no data back and be disconnected;
# the peers' reads and the server's buffer stay intact.
case_soft0_forge() {
  local ok=0 jvm other p out ports=0
  guarded_pair 18801 6 || return 1
  for jvm in "$server_jvm" "$client_jvm"; do
    other=$client_jvm; [ "$jvm" = "$client_jvm" ] && other=$server_jvm
    for p in $(listening_ports "$jvm"); do
      [ "$p" = 18801 ] && continue # the control connection: other cases
      ports=$((ports + 1))
      # shellcheck disable=SC2046 # one LID per port of the other peer
      out=$("${ATTACKER[@]}" soft0-forge "$(listening_address "$jvm" "$p")" "$p" $(listening_ports "$other" | grep -vx 18801) 2>&1)
      echo "port $p: $out" >>"$case_dir/attacker.log"
      case "$out" in
        *"closed=1"*) ;;
        *) why="${why:+$why; }soft0 port $p did not close the forging connection: $out"; ok=1 ;;
      esac
      # What an unauthenticated connection may see: the 48-byte authentication challenge at most.
      local got=${out#*bytes_received=}; got=${got%% *}
      if [ "${got:-0}" -gt 64 ]; then
        why="${why:+$why; }soft0 port $p sent $got bytes to an unauthenticated connection"
        ok=1
      fi
    done
  done
  expect_guarded_ok || ok=1
  note "$ports soft0 port(s) attacked: $(tr '\n' ';' <"$case_dir/attacker.log" | cut -c1-200)"
  return $ok
}

# Two connections stream 1 KiB frames for QPNs that do not exist into each soft0 port for 3 s
# while the peers run: the run succeeds, and the server's memory stays bounded.
case_soft0_flood() {
  local ok=0 p out rss
  guarded_pair 18802 8 || return 1
  for p in $(listening_ports "$server_jvm"); do
    [ "$p" = 18802 ] && continue
    out=$("${ATTACKER[@]}" flood "$(listening_address "$server_jvm" "$p")" "$p" 3 2>&1)
    echo "port $p: $out" >>"$case_dir/attacker.log"
  done
  rss=$(peak_rss_mib "$server_jvm")
  expect_guarded_ok || ok=1
  expect_log attacker "connections_closed_by_listener=" || ok=1
  if [ "${rss:-0}" -gt 700 ]; then
    why="${why:+$why; }the flooded server's peak RSS was $rss MiB"
    ok=1
  fi
  note "flooded: $(tr '\n' ';' <"$case_dir/attacker.log" | cut -c1-160); server peak RSS $rss MiB"
  return $ok
}

# --loopback: both peers' QPs are in one JVM and talk in memory; soft0 opens nothing on the
# network (the control connection's own listener is bound to 127.0.0.1 and closed once accepted).
case_loopback_no_listener() {
  local ok=0 jvm seen=
  start both "$RDMA_RUN" "$GUARDED" --loopback --set seconds=4 --set warmup=0 --set preflight=0
  wait_log both "running the scenario" || true
  jvm=$(java_pid both)
  for _ in 1 2 3 4 5 6; do
    seen+=$(ss -ltnpH 2>/dev/null | grep -F "pid=$jvm," | grep -vF "127.0.0.1:")
    sleep 0.5
  done
  finish both
  expect_rc both 0 || ok=1
  if [ -n "$seen" ]; then
    why="${why:+$why; }the --loopback JVM listened beyond 127.0.0.1: $seen"
    ok=1
  fi
  return $ok
}

# A drip (one byte a second) on a waiting server's port: the server closes it after its short
# handshake deadline, counts it, keeps waiting, and completes with the real client.
case_control_drip_server() {
  local port=18803 ok=0
  local args=("$root/samples/multi-qp.main.kts" -d soft0 --timeout 20s)
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  start drip "${ATTACKER[@]}" drip 127.0.0.1 "$port" 60
  sleep 2 # the drip is under way
  run client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  finish server
  finish drip
  expect_pair_ok "every payload verified" || ok=1
  expect_log drip "closed=1" || ok=1
  expect_log server "stray connection" || ok=1
  note "drip: $(tail -n 2 "$case_dir/drip.log" | head -n 1)"
  return $ok
}

# A client whose "server" drips its hello: the client's one deadline (--timeout 5s) ends it
# with one sentence, however slowly the bytes come.
case_control_drip_client() {
  local port=18804 ok=0 at took
  start fake "${ATTACKER[@]}" drip-server "$port" 60
  wait_log fake "listening" || return 1
  at=$SECONDS
  run client "$RDMA_RUN" "$root/samples/multi-qp.main.kts" -d soft0 --timeout 5s --peer "127.0.0.1:$port"
  took=$((SECONDS - at))
  finish fake
  expect_rc client 1 || ok=1
  expect_log client "sent its hello too slowly: no complete hello within 5s" || ok=1
  expect_no_log client "	at " || ok=1
  if [ "$took" -gt 40 ]; then
    why="${why:+$why; }the client took $took s with --timeout 5s"
    ok=1
  fi
  note "client ended $took s after it started (JVM start included): $(grep -m1 'rdma-run' "$case_dir/client.log" | cut -c1-160)"
  return $ok
}

# A port scan and a stray that sends the magic and 8 bytes: neither ends the waiting server, the
# stray learns nothing about it (no QPN, rkey, address or PSN: only the first step of the hello,
# which carries none), and the real client then completes.
case_control_scan_and_stray() {
  local port=18805 ok=0 scan out got
  local args=("$root/samples/multi-qp.main.kts" -d soft0 --timeout 20s "${NO_PREFLIGHT[@]}")
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  scan=$("${ATTACKER[@]}" scan 127.0.0.1 "$port" 5 2>&1)
  # The magic and 8 bytes, as in the attack: the frame never completes.
  start stray "${ATTACKER[@]}" stray 127.0.0.1 "$port" 5244524e0000010000000000
  run client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  finish server
  finish stray
  expect_pair_ok "every payload verified" || ok=1
  # What the stray got: the server's first step only (version, fingerprint, a nonce), nothing of its QPs.
  expect_log stray '"type":"hello"' || ok=1
  local word
  for word in '"qps"' rkey qpn psn addr fabricKey endpoints; do
    expect_no_log stray "$word" || ok=1
  done
  expect_log server "stray connection" || ok=1
  note "scan: $scan; the stray got $(grep -o 'bytes_received=[0-9]*' "$case_dir/stray.log")"
  return $ok
}

# --token on both sides completes; a client with another token (or none) is a stray to the server,
# which goes on waiting for the right one; the wrong client fails with one sentence.
case_control_token() {
  local port=18806 ok=0
  local args=("$root/samples/multi-qp.main.kts" -d soft0 --timeout 20s)
  start server env RDMA_RUN_TOKEN=s3cret-one "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  run wrong "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port" --token other-secret --timeout 8s
  run client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port" --token s3cret-one
  finish server
  expect_pair_ok "every payload verified" || ok=1
  expect_rc wrong 1 || ok=1
  expect_log wrong "token" || ok=1
  expect_no_secret wrong "other-secret" || ok=1
  expect_no_secret server "s3cret-one" || ok=1
  expect_no_secret client "s3cret-one" || ok=1
  note "wrong token: $(grep -m1 'rdma-run' "$case_dir/wrong.log" | cut -c1-160)"
  return $ok
}

# expect_intro_only WHO OUT: the attacker's result line OUT says it received the server's intro and
# at most a failure report: no proof, plan or endpoints.
expect_intro_only() {
  case "$2" in
    "received=hello,failure"|"received=hello") return 0 ;;
    *) why="${why:+$why; }$1 received more than the intro and a failure report: $2"; return 1 ;;
  esac
}

# A stranger who can connect but knows neither the secret nor the plan sends the server's own intro
# back as a client's and echoes whatever follows: it gets no proof and no endpoint, with the
# per-user secret (the default) and with --no-token alike; the server counts it as a stray and
# its real client then completes.
case_control_echo_intro() {
  local ok=0 mode port out
  for mode in default no-token; do
    local args=("$root/samples/multi-qp.main.kts" -d soft0 --timeout 20s "${NO_PREFLIGHT[@]}") server="server" client="client"
    port=18821
    if [ "$mode" = no-token ]; then args+=(--no-token); port=18822; server=server_nt; client=client_nt; fi
    start "$server" "$RDMA_RUN" "${args[@]}" --listen "$port"
    wait_listen "$port" "$server" || return 1
    out=$("${ATTACKER[@]}" echo-intro 127.0.0.1 "$port" 5 2>&1)
    echo "$mode: $out" >>"$case_dir/attacker.log"
    expect_intro_only "the echo ($mode)" "$out" || ok=1
    run "$client" "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
    finish "$server"
    expect_rc "$server" 0 || ok=1
    expect_rc "$client" 0 || ok=1
    expect_log "$server" "every payload verified" || ok=1
    expect_log "$server" "stray connection" || ok=1
  done
  note "$(tr '\n' ';' <"$case_dir/attacker.log")"
  return $ok
}

# An observer on the path records a client's whole control connection to a server, then replays
# the client's side to a new server of the same scenario, user and secret: the new server refuses
# it (the proofs are bound to its fresh nonce) and its own client then completes.
case_control_replay() {
  local ok=0 out
  local args=("$root/samples/multi-qp.main.kts" -d soft0 --timeout 20s "${NO_PREFLIGHT[@]}")
  start server "$RDMA_RUN" "${args[@]}" --listen 18823
  wait_listen 18823 server || return 1
  start relay "${ATTACKER[@]}" relay 18824 18823 "$case_dir/up.bin" "$case_dir/down.bin" 30
  wait_listen 18824 relay || return 1
  run client "$RDMA_RUN" "${args[@]}" --peer 127.0.0.1:18824
  finish server
  finish relay
  expect_pair_ok "every payload verified" || ok=1
  start server2 "$RDMA_RUN" "${args[@]}" --listen 18825
  wait_listen 18825 server2 || return 1
  out=$("${ATTACKER[@]}" replay 127.0.0.1 18825 "$case_dir/up.bin" 5 2>&1)
  expect_intro_only "the replay" "$out" || ok=1
  run client2 "$RDMA_RUN" "${args[@]}" --peer 127.0.0.1:18825
  finish server2
  expect_rc server2 0 || ok=1
  expect_rc client2 0 || ok=1
  expect_log server2 "stray connection" || ok=1
  note "recorded $(cat "$case_dir/relay.log" | tail -n +2 | head -n 1); replay: $out"
  return $ok
}

# An observer records the whole control connection of a token-protected soft0 run and tries every
# 64-hex-digit string it saw as soft0's fabric key at each peer's soft0 ports while they run: none
# authenticates (the key is derived on both sides, never sent), and the run succeeds.
case_soft0_observer() {
  local ok=0 jvm p out tried=0
  local args=("$GUARDED" -d soft0 --timeout 30s --set seconds=6 --token s3cret-observed --set warmup=0 --set preflight=0)
  start server "$RDMA_RUN" "${args[@]}" --listen 18826
  wait_listen 18826 server || return 1
  start relay "${ATTACKER[@]}" relay 18827 18826 "$case_dir/up.bin" "$case_dir/down.bin" 60
  wait_listen 18827 relay || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer 127.0.0.1:18827
  wait_log client "connected, running the scenario" || return 1
  server_jvm=$(java_pid server)
  client_jvm=$(java_pid client)
  for jvm in "$server_jvm" "$client_jvm"; do
    for p in $(listening_ports "$jvm"); do
      [ "$p" = 18826 ] && continue
      out=$("${ATTACKER[@]}" soft0-try-keys "$(listening_address "$jvm" "$p")" "$p" "$case_dir/up.bin" "$case_dir/down.bin" 2>&1)
      echo "port $p: $out" >>"$case_dir/attacker.log"
      tried=$((tried + 1))
      case "$out" in
        *"authenticated=0"*) ;;
        *) why="${why:+$why; }a key seen on the control connection authenticated at soft0 port $p: $out"; ok=1 ;;
      esac
    done
  done
  [ "$tried" -gt 0 ] || { why="${why:+$why; }no soft0 port to try"; ok=1; }
  expect_guarded_ok || ok=1
  finish relay
  expect_no_secret relay "s3cret-observed" || ok=1
  if grep -qaF "s3cret-observed" "$case_dir/up.bin" "$case_dir/down.bin"; then why="${why:+$why; }the token crossed the wire"; ok=1; fi
  note "$(tr '\n' ';' <"$case_dir/attacker.log")"
  return $ok
}

# A peer's failure text with terminal escape sequences and a forged line reaches the other side's
# terminal escaped: no ESC byte, no line break that was not ours.
case_peer_text_escaped() {
  local port=18807 ok=0 kts="$root/e2e/hostile/escape.main.kts"
  start server "$RDMA_RUN" "$kts" -d soft0 --timeout 20s --listen "$port"
  wait_listen "$port" server || return 1
  run client "$RDMA_RUN" "$kts" -d soft0 --timeout 20s --peer "127.0.0.1:$port"
  finish server
  expect_rc server 1 || ok=1
  expect_rc client 1 || ok=1
  if grep -q $'\e' "$case_dir/client.log"; then
    why="${why:+$why; }an ESC byte from the server reached the client's output"
    ok=1
  fi
  # The forged line stays inside the escaped sentence (after \u000a): no line of its own.
  if grep -q '^rdma-run: all good' "$case_dir/client.log"; then
    why="${why:+$why; }the server's text forged a line of the client's output"
    ok=1
  fi
  expect_log client '\u000ardma-run: all good' || ok=1
  expect_log client '\u001b[2J' || ok=1
  note "client: $(grep -m1 'the server failed' "$case_dir/client.log" | cut -c1-160)"
  return $ok
}

# A message longer than soft0's max_msg_sz (16 MiB) fails before anything is made, with one sentence, at both
# sizes the attack used: pingpong checks -s against the port's max_msg_sz first, so each side stops there, at once,
# before any peer is involved.
case_soft0_message_too_long() {
  local ok=0 size
  for size in 16777217 2147483647; do
    run "side$size" "$RDMA_RUN" pingpong -d soft0 -p 18808 -s "$size" -n 5 --peer-timeout 20
    expect_rc "side$size" 1 || ok=1
    # Said with the flag, before any verbs object is made (it was ibv_post_recv's errno sentence).
    expect_log "side$size" "-s $size (--size) is more than max_msg_sz 16777216 of soft0 port 1" || ok=1
    expect_no_log "side$size" "OutOfMemoryError" || ok=1
  done
  note "$(grep -m1 -o 'rdma-run pingpong: -s .*' "$case_dir/side2147483647.log" | cut -c1-160)"
  return $ok
}

# A bad GID index on a server is reported at once, before any client connects.
case_bad_gid_before_client() {
  local ok=0
  run server "$RDMA_RUN" "$root/samples/multi-qp.main.kts" -d soft0 -g 99 --timeout 60s --listen 18811
  expect_rc server 1 || ok=1
  expect_log server "GID index 99" || ok=1
  return $ok
}

# ---- bad local input: one sentence, the documented exit code ----

local_script() {
  printf '%s' "$2" >"$case_dir/$1"
  echo "$case_dir/$1"
}

case_script_empty() {
  local f ok=0
  f=$(local_script empty.main.kts "")
  run empty "$RDMA_RUN" "$f" --loopback
  expect_rc empty 2 || ok=1
  expect_log empty "has no rdma { } block" || ok=1
  return $ok
}

case_script_no_rdma() {
  local f ok=0
  f=$(local_script plain.main.kts 'println("no scenario here")')
  run plain "$RDMA_RUN" "$f" --loopback
  expect_rc plain 2 || ok=1
  expect_log plain "has no rdma { } block" || ok=1
  return $ok
}

case_script_binary() {
  local ok=0 lines
  head -c 20000 "$root/scripts/target/rdma-run.jar" >"$case_dir/binary.main.kts"
  run binary "$RDMA_RUN" "$case_dir/binary.main.kts" --loopback
  expect_rc binary 2 || ok=1
  expect_log binary "is not a Kotlin script" || ok=1
  lines=$(wc -l <"$case_dir/binary.log")
  if [ "$lines" -gt 5 ]; then
    why="${why:+$why; }a binary script printed $lines lines"
    ok=1
  fi
  return $ok
}

case_script_not_utf8() {
  local ok=0
  printf 'println("caf\xe9")\n' >"$case_dir/latin1.main.kts"
  run latin1 "$RDMA_RUN" "$case_dir/latin1.main.kts" --check
  expect_rc latin1 2 || ok=1
  expect_log latin1 "is not a Kotlin script: it is not UTF-8 text (byte 0xe9 at offset 12)" || ok=1
  return $ok
}

# 40 syntax errors: 10 shown as file:line:col, the rest counted.
case_script_many_errors() {
  local ok=0
  { echo 'import dev.rdmarun.dsl.*'; echo 'rdma {'; for _ in $(seq 40); do echo '}'; done; } >"$case_dir/garbage.main.kts"
  run garbage "$RDMA_RUN" "$case_dir/garbage.main.kts" --check
  expect_rc garbage 2 || ok=1
  if [ "$(grep -c 'garbage.main.kts:[0-9]*:[0-9]*: error: ' "$case_dir/garbage.log")" != 10 ]; then
    why="${why:+$why; }not exactly 10 diagnostics"
    ok=1
  fi
  grep -qE '^\.\.\. and [0-9]+ more errors$' "$case_dir/garbage.log" || { why="${why:+$why; }no '... and K more errors' line"; ok=1; }
  return $ok
}

case_script_exception() {
  local f ok=0
  f=$(local_script boom.main.kts $'import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    check(qpCount > 5) { "boom on purpose" }\n}\n')
  run boom "$RDMA_RUN" "$f" --loopback
  expect_rc boom 1 || ok=1
  expect_log boom "boom.main.kts:5" || ok=1
  expect_log boom "IllegalStateException" || ok=1
  expect_log boom "boom on purpose" || ok=1
  return $ok
}

case_script_system_exit() {
  local f ok=0 at took
  f=$(local_script exit.main.kts $'import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    System.exit(3)\n}\n')
  at=$SECONDS
  run quit "$RDMA_RUN" "$f" --loopback
  took=$((SECONDS - at))
  expect_rc quit 3 || ok=1
  expect_log quit "System.exit(3)" || ok=1
  note "System.exit(3): exited 3 after $took s (JVM start included)"
  return $ok
}

case_script_busy_interrupted() {
  local f ok=0 at took
  f=$(local_script busy.main.kts $'import dev.rdmarun.dsl.*\n\nrdma {\n    connect(peer)\n    println("busy now")\n    while (true) { }\n}\n')
  # env --default-signal=INT: a shell without job control starts background jobs with SIGINT ignored.
  start busy env --default-signal=INT "$RDMA_RUN" "$f" --loopback
  wait_log busy "busy now" || return 1
  kill -INT "$(java_pid busy)"
  at=$SECONDS
  finish busy
  took=$((SECONDS - at))
  expect_rc busy 130 || ok=1
  expect_log busy "interrupted" || ok=1
  if [ "$took" -gt 8 ]; then
    why="${why:+$why; }Ctrl-C on a busy loop took $took s"
    ok=1
  fi
  note "Ctrl-C on a busy loop: exit 130 after $took s"
  return $ok
}

# A jar planted in the compiled-script cache under another script's key is not run: its digest
# does not match the cache's index, so the script is compiled again.
case_cache_planted_jar() {
  local ok=0 key evil
  export RDMA_RUN_CACHE="$case_dir/cache"
  echo 'println("GOOD")' >"$case_dir/good.main.kts"
  echo 'println("PLANTED")' >"$case_dir/evil.main.kts"
  run good1 "$RDMA_RUN" "$case_dir/good.main.kts" --check --debug
  run evil1 "$RDMA_RUN" "$case_dir/evil.main.kts" --check --debug
  key=$(sed -n 's/.*cached as .*\/\([0-9a-f]*\)\.jar$/\1/p' "$case_dir/good1.log")
  evil=$(sed -n 's/.*cached as \(.*\.jar\)$/\1/p' "$case_dir/evil1.log")
  if [ -z "$key" ] || [ ! -f "$evil" ]; then
    why="the cache entries were not found in the --debug output"
    unset RDMA_RUN_CACHE
    return 1
  fi
  cp "$evil" "$RDMA_RUN_CACHE/scripts/$key.jar"
  run good2 "$RDMA_RUN" "$case_dir/good.main.kts" --check
  unset RDMA_RUN_CACHE
  expect_log good2 GOOD || ok=1
  expect_no_log good2 PLANTED || ok=1
  [ "$(stat -c %a "$case_dir/cache/scripts")" = 700 ] || { why="${why:+$why; }the cache folder is not 0700"; ok=1; }
  return $ok
}

# cache_attack_scripts: good.main.kts (prints GOOD) and evil.main.kts (prints PLANTED and writes
# $case_dir/marker), each compiled into a cache of its own ($case_dir/victim, $case_dir/attacker).
# Sets good_key (the good script's cache key) and evil_jar, and copies the victim's index to
# $case_dir/victim-index (to forge from); the marker of evil's own run is removed.
cache_attack_scripts() {
  echo 'println("GOOD")' >"$case_dir/good.main.kts"
  printf 'java.io.File("%s").writeText("planted")\nprintln("PLANTED")\n' "$case_dir/marker" >"$case_dir/evil.main.kts"
  RDMA_RUN_CACHE="$case_dir/victim" run good1 "$RDMA_RUN" "$case_dir/good.main.kts" --check --debug
  RDMA_RUN_CACHE="$case_dir/attacker" run evil1 "$RDMA_RUN" "$case_dir/evil.main.kts" --check --debug
  rm -f "$case_dir/marker"
  cp "$case_dir/victim/scripts/index" "$case_dir/victim-index" || { why="the victim's cache has no index"; return 1; }
  good_key=$(sed -n 's/.*cached as .*\/\([0-9a-f]*\)\.jar$/\1/p' "$case_dir/good1.log")
  evil_jar=$(sed -n 's/.*cached as \(.*\.jar\)$/\1/p' "$case_dir/evil1.log")
  if [ -z "$good_key" ] || [ ! -f "$evil_jar" ]; then
    why="the cache entries were not found in the --debug output"
    return 1
  fi
}

# plant_entry DIR: what the attacker leaves in folder DIR: evil_jar as the good script's jar and
# the victim's index with that line's jar digest changed; its MAC (a v2 index has one) made with
# a key of the attacker's, as the user's key (0600) cannot be read. As root, owned by uid 65534.
plant_entry() {
  local dir=$1
  rm -f "$dir/$good_key.jar" "$dir/index"
  cp "$evil_jar" "$dir/$good_key.jar"
  python3 - "$case_dir/victim-index" "$good_key" "$evil_jar" >"$dir/index" <<'PY'
import hashlib, hmac, os, sys
index, key, jar = sys.argv[1:]
digest = hashlib.sha256(open(jar, "rb").read()).hexdigest()
lines = open(index).read().splitlines()
for i, line in enumerate(lines[1:], 1):
    f = line.split(" ")
    if f[0] == key:
        f[3] = digest
        if len(f) == 5:
            f[4] = hmac.new(os.urandom(32), " ".join(f[:4]).encode(), hashlib.sha256).hexdigest()
        lines[i] = " ".join(f)
print("\n".join(lines))
PY
  grep -q "^$good_key " "$dir/index" || { why="no forged index line for $good_key"; return 1; }
  [ "$(id -u)" != 0 ] || chown 65534 "$dir/$good_key.jar" "$dir/index"
}

# The good script ran from cache CACHE ($1, the name of the run $2), the planted code did not (it
# exits 2 as it has no rdma { } block: only its output counts).
expect_good_not_planted() {
  local ok=0
  RDMA_RUN_CACHE=$1 run "$2" "$RDMA_RUN" "$case_dir/good.main.kts" --check --debug
  expect_log "$2" GOOD || ok=1
  expect_no_log "$2" PLANTED || ok=1
  if [ -e "$case_dir/marker" ]; then why="${why:+$why; }the planted jar ran (it wrote $case_dir/marker)"; ok=1; fi
  return $ok
}

# Issue 18: a jar and a forged index line planted by another user while the cache folder was 0777
# never run: the folder is emptied and made again (0700, only the user's files), not re-moded.
case_cache_open_folder() {
  local ok=0 dir="$case_dir/victim/scripts"
  cache_attack_scripts || return 1
  chmod 777 "$dir"
  plant_entry "$dir" || return 1
  expect_good_not_planted "$case_dir/victim" good2 || ok=1
  expect_log good2 "emptied the compiled-script cache $dir, which cannot be trusted: it is writable by others (mode 0777)" || ok=1
  [ "$(stat -c %a "$dir")" = 700 ] || { why="${why:+$why; }the cache folder is not 0700"; ok=1; }
  if [ -n "$(find "$dir" ! -uid "$(id -u)" -print -quit)" ]; then why="${why:+$why; }another user's file is left in $dir"; ok=1; fi
  return $ok
}

# Issue 18: a cache folder of another user whose scripts entry links to a world-writable folder
# (1777, as /tmp) is not used: the link is not followed, the folder keeps its mode, its jar never runs.
case_cache_scripts_link() {
  local ok=0 open="$case_dir/open" theirs="$case_dir/theirs"
  cache_attack_scripts || return 1
  mkdir -p "$open" "$theirs"
  chmod 1777 "$open"
  plant_entry "$open" || return 1
  ln -s "$open" "$theirs/scripts"
  [ "$(id -u)" != 0 ] || chown -h 65534 "$theirs" "$theirs/scripts"
  expect_good_not_planted "$theirs" good2 || ok=1
  expect_log good2 "not using the compiled-script cache $theirs/scripts" || ok=1
  [ "$(stat -c %a "$open")" = 1777 ] || { why="${why:+$why; }the link's target $open was chmod-ed to $(stat -c %a "$open")"; ok=1; }
  return $ok
}

# 64 idle connections to the server's soft0 port before the client starts, each replaced as soon
# as the listener closes it, so they hold its 16 unauthenticated slots: the client's connection
# still gets one (the listener evicts an idle one) and the run succeeds with its data intact.
case_soft0_flood_first() {
  local port=18828 ok=0 p= _
  local args=("$GUARDED" -d soft0 --timeout 30s --set seconds=3 --set warmup=0 --set preflight=0)
  start server "$RDMA_RUN" "${args[@]}" --listen "$port"
  wait_listen "$port" server || return 1
  server_jvm=$(java_pid server)
  # The soft0 port opens just after the control port, before any client (the QPs are made first).
  for _ in $(seq 1 100); do
    p=$(listening_ports "$server_jvm" | grep -vx "$port" | head -n 1)
    [ -n "$p" ] && break
    sleep 0.1
  done
  if [ -z "$p" ]; then
    why="the server opened no soft0 port before its client came"
    return 1
  fi
  start attacker "${ATTACKER[@]}" idle "$(listening_address "$server_jvm" "$p")" "$p" 64 60
  wait_log attacker "holding 64 idle connections" || return 1
  start client "$RDMA_RUN" "${args[@]}" --peer "127.0.0.1:$port"
  expect_guarded_ok || ok=1
  kill "$pid_attacker" 2>/dev/null # it prints what it saw as it ends
  finish attacker
  note "soft0 port $p flooded before the client: $(grep -F opened= "$case_dir/attacker.log" | cut -c1-120)"
  return $ok
}

# An mpirun inside a Slurm step: Open MPI numbers this process rank 1 of 2, Slurm's step rank 0 of
# 1. Guessing would make two servers (or no client): it exits 1 with one sentence naming both,
# before it compiles or touches a device.
case_launcher_disagree() {
  local ok=0
  run mixed env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_STEP_ID=0 \
    "$RDMA_RUN" "$root/samples/multi-qp.main.kts" -d soft0
  expect_rc mixed 1 || ok=1
  expect_log mixed "the launchers disagree: Open MPI says rank 1 of 2 (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) but Slurm says rank 0 of 1" || ok=1
  expect_no_log mixed "compiling" || ok=1
  return $ok
}

# Four ranks by hand, all to all; rank 2 is killed (SIGKILL) once its three pairs run: every other
# rank exits 1, long before its --timeout, with a sentence that names rank 2 and its pid.
case_rank_killed() {
  local ok=0 k args=("$root/e2e/hostile/ranks-running.main.kts" -d soft0 --timeout 60s --ranks 4 --rendezvous 127.0.0.1:18790 "${NO_PREFLIGHT[@]}")
  for k in 0 1 2 3; do start "rank$k" "$RDMA_RUN" "${args[@]}" --rank "$k"; done
  for k in 0 1 3; do wait_log rank2 "rank 2 connected to rank $k" || return 1; done
  local victim
  victim=$(java_pid rank2)
  kill -KILL "$victim"
  for k in 0 1 2 3; do finish "rank$k"; done
  for k in 0 1 3; do
    expect_rc "rank$k" 1 || ok=1
    expect_log "rank$k" "rank 2 (" || ok=1
    expect_log "rank$k" "pid $victim" || ok=1
  done
  return $ok
}

# The rendezvous is rank 0's control server: a stray (the magic and 8 bytes) and a rank with another
# token are closed and counted there, the wrong rank fails with one sentence, and the three real
# ranks complete their all-to-all.
case_rendezvous_strays() {
  local port=18791 ok=0 k
  local args=("$root/samples/alltoall.main.kts" -d soft0 --timeout 60s --ranks 3 --rendezvous "127.0.0.1:$port"
    "${NO_PREFLIGHT[@]}" --set iterations=100)
  start rank0 "$RDMA_RUN" "${args[@]}" --rank 0 --interval 1
  wait_listen "$port" rank0 || return 1
  start stray "${ATTACKER[@]}" stray 127.0.0.1 "$port" 5244524e0000010000000000
  run wrong "$RDMA_RUN" "${args[@]}" --rank 1 --token other-secret --timeout 8s
  for k in 1 2; do start "rank$k" "$RDMA_RUN" "${args[@]}" --rank "$k"; done
  for k in 0 1 2; do
    finish "rank$k"
    expect_rc "rank$k" 0 || ok=1
  done
  finish stray
  expect_rc wrong 1 || ok=1
  expect_log wrong "token" || ok=1
  expect_no_secret wrong "other-secret" || ok=1
  expect_log rank0 "ranks: 3, 6 pair results gathered on rank 0" || ok=1
  expect_log rank0 "stray connection" || ok=1
  expect_log rank0 "a token (--token or RDMA_RUN_TOKEN)" || ok=1
  expect_log rank0 "refused a connection (this side uses its per-user secret and a rank at 127.0.0.1:" || ok=1
  # --interval follows each pair: its ID tied to the pair, then its rows (rank 0 is every pair's server).
  expect_log rank0 "] rank 0 with rank 2" || ok=1
  expect_log rank0 "][TX-S]" || ok=1
  note "rank 0: $(grep -m1 -o 'closed [0-9]* stray connections*' "$case_dir/rank0.log")"
  return $ok
}

# Two Open MPI jobs share a rendezvous port: job 111's rank 0 and 1 wait there when job 222's
# rank 2 arrives. It is refused with a sentence naming both jobs, job 111's rank 0 counts it and
# keeps waiting, and job 111's own rank 2 completes the run.
case_rendezvous_other_run() {
  local port=18792 ok=0 k
  local args=("$root/samples/alltoall.main.kts" -d soft0 --timeout 60s -p "$port" "${NO_PREFLIGHT[@]}" --set iterations=100)
  local of=(OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_LOCAL_SIZE=3)
  start rank0 env "${of[@]}" PMIX_NAMESPACE=111 OMPI_COMM_WORLD_RANK=0 "$RDMA_RUN" "${args[@]}"
  wait_listen "$port" rank0 || return 1
  start rank1 env "${of[@]}" PMIX_NAMESPACE=111 OMPI_COMM_WORLD_RANK=1 "$RDMA_RUN" "${args[@]}"
  run other env "${of[@]}" PMIX_NAMESPACE=222 OMPI_COMM_WORLD_RANK=2 "$RDMA_RUN" "${args[@]}"
  start rank2 env "${of[@]}" PMIX_NAMESPACE=111 OMPI_COMM_WORLD_RANK=2 "$RDMA_RUN" "${args[@]}"
  for k in 0 1 2; do
    finish "rank$k"
    expect_rc "rank$k" 0 || ok=1
  done
  expect_rc other 1 || ok=1
  expect_log other "the launchers' runs differ (job 222 here, 111 on the server): is another run using the rendezvous port?" || ok=1
  expect_log rank0 "refused a connection (a rank at 127.0.0.1:" || ok=1
  expect_log rank0 "ranks: 3, 6 pair results gathered on rank 0" || ok=1
  return $ok
}

run_cases "$@"
