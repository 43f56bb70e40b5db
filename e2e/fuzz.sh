#!/usr/bin/env bash
# Fuzzes the three decoders that read bytes from the network, SECONDS each (default 60), with
# Jazzer's JUnit fuzz tests in fuzzing mode (JAZZER_FUZZ=1); `./mvnw verify` runs the same tests
# on their seed corpus only. Works offline once bin/setup (or a build) has filled ~/.m2.
#
#   e2e/fuzz.sh [SECONDS]
#
# Targets: soft0's packet decoder (runtime, TcpTransportFuzzTest), the control connection's frame
# decoder and hello check (dsl, FrameCodecFuzzTest), ibv_rc_pingpong's address message (scripts,
# PingpongWireFuzzTest). One line per target (executions, result), then "N passed, M failed"; the
# exit status is non-zero on any finding or on a target that did not run. An input that takes
# longer than 10 s is a finding too. The corpus each run grows stays out of git in
# <module>/.cifuzz-corpus/ (the next run starts from it); a finding's input is written where the
# regression run reads it, <module>/src/test/resources/<package>/<Test>Inputs/<method>/crash-*
# (commit it with the fix). Maven's log: target/fuzz/maven.log.
# A fourth target reads files rather than the network: `rdma-run report`'s reader of results
# documents (scripts, ResultsReaderFuzzTest), seeded with documents that real runs on soft0 wrote.
set -uo pipefail

root="$(CDPATH= cd -P -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2

seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: e2e/fuzz.sh [SECONDS]  (seconds per target, default 60)" >&2
  exit 2
fi
LOGS=${FUZZ_LOG_DIR:-$root/target/fuzz}
mkdir -p "$LOGS" || exit 2
log="$LOGS/maven.log"

# module:test class:fuzz method
TARGETS=(
  runtime:dev.rdmarun.runtime.soft.TcpTransportFuzzTest:read
  dsl:dev.rdmarun.dsl.FrameCodecFuzzTest:helloFrame
  scripts:dev.rdmarun.scripts.PingpongWireFuzzTest:addressMessage
  scripts:dev.rdmarun.scripts.ResultsReaderFuzzTest:document
)
classes=()
for t in "${TARGETS[@]}"; do
  IFS=: read -r module class _ <<<"$t"
  classes+=("${class##*.}")
  # A report left from an earlier run must not pass for this one.
  rm -f "$module/target/surefire-reports/TEST-$class.xml"
done

# One Maven run: each fuzz test runs in a test JVM of its own (Jazzer fuzzes one test per JVM;
# scripts has two: reuseForks=false), and a finding in one does not skip the others (failure.ignore; judged below).
# The JSON parser the frame decoder relies on is instrumented too, so the fuzzer sees its branches.
# -timeout goes to libFuzzer through Jazzer's argument passing (a JUnit timeout would bound the
# whole run, not one input). The outer timeout is only a safety net.
echo "fuzz: ${#TARGETS[@]} targets, ${seconds} s each (log: $log)"
JAZZER_FUZZ=1 timeout -k 30 $((${#TARGETS[@]} * seconds + 900)) ./mvnw -o -B \
  -pl runtime,dsl,scripts -am test \
  -Dtest="$(IFS=,; echo "${classes[*]}")" -Dsurefire.failIfNoSpecifiedTests=false \
  -Dmaven.test.failure.ignore=true \
  -DreuseForks=false \
  -Djazzer.max_duration="${seconds}s" \
  -Djazzer.instrument='dev.rdmarun.**,kotlinx.serialization.**' \
  -Djazzer.internal.arg.0=fuzz -Djazzer.internal.arg.1=-timeout=10 -Djazzer.internal.arg.2=-print_final_stats=1 \
  -Dtest.jvm.extra.args=-Xmx1g \
  >"$log" 2>&1
mvn_rc=$?

# attr NAME FILE: the value of attribute NAME on the XML report's <testsuite> element.
attr() { sed -n "s/.*<testsuite [^>]*\b$1=\"\([^\"]*\)\".*/\1/p" "$2" | head -1; }

passed=0 failed=0
for t in "${TARGETS[@]}"; do
  IFS=: read -r module class method <<<"$t"
  name="${class##*.}.$method"
  report="$module/target/surefire-reports/TEST-$class.xml"
  # libFuzzer's figures from this class's part of the log (between its "Running" and its result).
  section=$(awk -v c="$class" '$0 ~ "Running " c "$" { on = 1 } on { print } on && $0 ~ "in " c "$" { exit }' "$log")
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' <<<"$section" | tail -1)
  [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs in.*/\1/p' <<<"$section" | tail -1)
  cov=$(grep -o ' cov: [0-9]*' <<<"$section" | tail -1 | tr -dc 0-9)
  corp=$(grep -o ' corp: [0-9]*' <<<"$section" | tail -1 | tr -dc 0-9)
  figures="${runs:-?} executions, cov ${cov:-?}, corpus ${corp:-?}"
  if [ ! -f "$report" ]; then
    echo "FAIL $name: did not run (mvn exit status $mvn_rc; see $log)"
    failed=$((failed + 1))
  elif [ "$(attr failures "$report")" != 0 ] || [ "$(attr errors "$report")" != 0 ]; then
    what=$(grep -m1 -o 'FuzzTestFindingException: .*' <<<"$section" | sed 's/^FuzzTestFindingException: //')
    [ -n "$what" ] || what=$(grep -m1 '^== Java Exception:\|^==[0-9]*== ERROR: libFuzzer' <<<"$section")
    input=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' <<<"$section" | head -1)
    echo "FAIL $name: $figures: finding ${what:-(see $report)}${input:+; input: $input}"
    failed=$((failed + 1))
  elif [ -z "$runs" ]; then
    echo "FAIL $name: no fuzzing figures in the log (was it run in regression mode? see $log)"
    failed=$((failed + 1))
  else
    echo "PASS $name: $figures, no finding"
    passed=$((passed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$mvn_rc" = 0 ]
