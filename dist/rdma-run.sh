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
# --enable-native-access: FFM; --sun-misc-unsafe-memory-access=allow: the embedded Kotlin compiler.
exec "$home/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
  ${java_opts[@]+"${java_opts[@]}"} -jar "$home/app/rdma-run.jar" "$@"
