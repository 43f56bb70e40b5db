#!/usr/bin/env bash
# The bench module's JMH benchmarks (not run by CI; figures go to BENCHMARKS.md):
#
#   bench/jmh.sh [JMH OPTIONS] [BENCHMARK REGEX]      e.g.  bench/jmh.sh DowncallBench
#   ../shared/softroce/softroce-vm.sh -C -c 1 -- bench/jmh.sh DowncallBench -p target=rxe0
#
# DowncallBench: a fast-path verbs call (poll_cq) from Java next to the same function pointer
# called from a C loop; -p target=DEVICE uses that device's poll_cq on an empty CQ, the default
# (host) a C function that returns 0. Build first: ./mvnw -DskipTests package.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cp="$root/bench/target/classpath.txt"
lib="$root/bench/target/native/librrbench.so"
[[ -f $cp && -f $root/bench/target/classes/META-INF/BenchmarkList ]] || { echo "bench/jmh.sh: build first: ./mvnw -DskipTests package" >&2; exit 2; }
[[ -f $lib ]] || { echo "bench/jmh.sh: $lib is missing: install gcc and build again" >&2; exit 2; }
java=$( . "$root/bin/jdk.sh" >/dev/null && echo "$JAVA_HOME/bin/java")
# The forked benchmark JVMs inherit these options.
exec "$java" --enable-native-access=ALL-UNNAMED -Drdmarun.bench.lib="$lib" \
  -cp "$root/bench/target/classes:$(cat "$cp")" org.openjdk.jmh.Main "$@"
