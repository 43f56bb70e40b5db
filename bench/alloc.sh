#!/usr/bin/env bash
# Bytes allocated per operation in steady state (ThreadMXBean, after a warm-up that is not
# counted): the runtime's engine alone, and the DSL's design-card loop. See AllocBench.kt.
#
#   bench/alloc.sh [DEVICE [OPS [WARMUP]]]     default: soft0 1000000 200000
#
# In the Soft-RoCE VM, give rxe0. Build first (./mvnw -DskipTests package). The last two lines
# are `runtime_bytes_per_op=` and `dsl_bytes_per_op=`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cp="$root/bench/target/classpath.txt"
[[ -f $cp && -d $root/bench/target/classes ]] || { echo "bench/alloc.sh: build first: ./mvnw -DskipTests package" >&2; exit 2; }
java=$( . "$root/bin/jdk.sh" >/dev/null && echo "$JAVA_HOME/bin/java")
exec "$java" --enable-native-access=ALL-UNNAMED -Xms256m -Xmx256m -XX:+UseSerialGC \
  -cp "$root/bench/target/classes:$(cat "$cp")" dev.rdmarun.bench.AllocBenchKt "${1:-soft0}" "${2:-1000000}" "${3:-200000}"
