#!/usr/bin/env bash
# rdma-run from its archive: the bundled Java runtime (never JAVA_HOME) and the bundled jars.
# Extra JVM options go in RDMA_RUN_JAVA_OPTS. libibverbs comes from the system (libibverbs1 and
# ibverbs-providers on Debian/Ubuntu).
set -euo pipefail
src="${BASH_SOURCE[0]}"
while [ -L "$src" ]; do  # linked into ~/bin: find the archive through the links
  dir="$(CDPATH= cd -P -- "$(dirname -- "$src")" && pwd)"
  src="$(readlink -- "$src")"
  case "$src" in /*) ;; *) src="$dir/$src" ;; esac
done
home="$(dirname -- "$(CDPATH= cd -P -- "$(dirname -- "$src")" && pwd)")"
read -r -a java_opts <<<"${RDMA_RUN_JAVA_OPTS-}"
# The archive's AOT cache (dist/build.sh) halves startup. It names the jars /proc/self/fd/9/...,
# so app/ is opened as descriptor 9: then it holds wherever the archive is unpacked. As in
# bin/rdma-run, only if no jar is newer: JDK 25.0.3 does not notice a replaced jar and would run
# the cached classes. -Xlog:aot=off keeps the JVM quiet when the cache is unusable (a large -Xmx,
# other module options in RDMA_RUN_JAVA_OPTS, which come later and win); it then runs without.
aot_opts=()
aot="$home/app/rdma-run.aot"
if [ -f "$aot" ] && [ -d /proc/self/fd ] &&
  [ -z "$(find "$home/app" -name '*.jar' -newer "$aot" -print -quit 2>/dev/null)" ] &&
  { exec 9<"$home/app"; } 2>/dev/null; then
  aot_opts=("-XX:AOTCache=$aot" -Xlog:aot=off)
fi
# --enable-native-access: FFM; --sun-misc-unsafe-memory-access=allow: the embedded Kotlin compiler.
# dist/build.sh trains the AOT cache with these two: change them there too.
exec "$home/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
  ${aot_opts[@]+"${aot_opts[@]}"} ${java_opts[@]+"${java_opts[@]}"} -jar "$home/app/rdma-run.jar" "$@"
