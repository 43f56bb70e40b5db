#!/usr/bin/env bash
# Builds rdma-run-VERSION-linux-x64.tar.gz (run by dist/pom.xml in `package`):
#   dist/build.sh VERSION JAVA_HOME TARGET_DIR
# The archive holds a Java runtime made by jlink with the modules the jars need (no JDK where it is
# unpacked), the launcher's jars with an AOT cache made by that runtime, bin/rdma-run, the samples,
# LICENSE, README.md with the documents it links to (docs/, SECURITY.md, ...), a man page, and
# maven/: a Maven repository with the runtime and the DSL (jars, POMs, sources and javadoc jars),
# which dist/pom.xml installed into TARGET_DIR/maven-repository before this runs.
set -euo pipefail
version=$1 jdk=$2 target=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
name="rdma-run-$version"
stage="$target/stage/$name"
rm -rf "$target/stage" && mkdir -p "$stage/app" "$stage/bin" "$stage/samples" "$stage/man/man1"

# The modules the jars use: `jdeps --print-module-deps --ignore-missing-deps --multi-release 25
# --class-path 'scripts/target/lib/*' scripts/target/rdma-run.jar scripts/target/lib/*.jar` (18 s,
# so not on every build), without jdk.compiler (the Kotlin compiler runs without javac), with
# jdk.zipfs (the script host reads jars through it) and jdk.management (thread CPU and allocation
# figures of `pingpong --debug`).
modules=java.base,java.desktop,java.instrument,java.logging,java.management,java.naming,java.rmi,java.scripting,java.security.jgss,jdk.management,jdk.unsupported,jdk.zipfs
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-header-files --no-man-pages --compress=zip-6 \
  --output "$stage/runtime"

# The repository, as Maven's install left it: a local repository's layout, so it serves as a
# remote one (file://) and can be copied into ~/.m2/repository as it is (README, "From an IDE").
for a in rdma-run-parent/$version/rdma-run-parent-$version.pom \
  rdma-runtime/$version/rdma-runtime-$version{.jar,.pom,-sources.jar,-javadoc.jar} \
  rdma-dsl/$version/rdma-dsl-$version{.jar,.pom,-sources.jar,-javadoc.jar}; do
  [ -s "$target/maven-repository/dev/rdmarun/$a" ] || { echo "dist: maven-repository lacks dev/rdmarun/$a" >&2; exit 1; }
done
cp -r "$target/maven-repository" "$stage/maven"

cp "$root/scripts/target/rdma-run.jar" "$stage/app/"
cp -r "$root/scripts/target/lib" "$stage/app/lib"
install -m 0755 "$here/rdma-run.sh" "$stage/bin/rdma-run"
cp "$root"/samples/*.main.kts "$stage/samples/"
# The README and the documents it links to, where its links point: docs/ and, beside it, SECURITY.md,
# BENCHMARKS.md and the perftest output parser it shows (e2e/dist.sh checks every link resolves).
cp "$root/LICENSE" "$root/README.md" "$root/SECURITY.md" "$root/BENCHMARKS.md" "$stage/"
cp -r "$root/docs" "$stage/docs"
install -D -m 0755 "$root/e2e/perftest_parse.py" "$stage/e2e/perftest_parse.py"

# app/rdma-run.aot: the archive's AOT cache (JEP 483), which bin/rdma-run passes to the JVM (a cached
# script reaches its first verbs call in under half the time, BENCHMARKS.md). Made as scripts/pom.xml
# makes the checkout's: a plan check compiles the training script into a private compiled-script
# cache (target/aot-training, with the logs; not in the archive), then a training run records what
# to cache (scripts/.../AotTraining.kt: the script in loopback and as two peers over TCP, then
# `rdma-run pingpong`, all on soft0). All with the archive's own runtime (a cache serves only the JVM build that made it) and
# the launcher's options (with other module options JDK 25 rejects the whole cache).
# The cache records the jars' paths, and JDK 25.0.3 makes the cached classes' code source
# (CodeSource.getLocation(), which the script host reads) from the recorded path as it is: null
# where it does not exist, and a relative one is taken from the user's working directory. So the
# runs open app/ as descriptor 9 and start -jar /proc/self/fd/9/rdma-run.jar: the recorded paths,
# /proc/self/fd/9/rdma-run.jar and /proc/self/fd/9/lib/*.jar, hold wherever the archive is unpacked
# once bin/rdma-run opens its app/ as descriptor 9 too, and say nothing of this build's directory.
# Two steps (record, create) rather than -XX:AOTCacheOutput, whose second JVM would not inherit the
# descriptor. -XX:-AOTAdapterCaching: JDK 25.0.3 would also store call adapters compiled for this
# host's CPU and load them on any CPU, unchecked (later 25 updates turn them off); about 10 ms.
training="$root/scripts/src/aot/training.main.kts"
conf="$target/aot-training/rdma-run.aotconf"
rm -rf "$target/aot-training" && mkdir -p "$target/aot-training"
train() {
  local log="$target/aot-training/$1.log"; shift
  (exec 9<"$stage/app" && RDMA_RUN_CACHE="$target/aot-training" RDMA_RUN_TOKEN="rdma-run AOT training" "$stage/runtime/bin/java" \
    --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow "$@") >"$log" 2>&1 ||
    { tail -20 "$log" >&2; exit 1; }
}
train check -jar /proc/self/fd/9/rdma-run.jar "$training" --check
train record -XX:AOTMode=record -XX:AOTConfiguration="$conf" \
  -cp /proc/self/fd/9/rdma-run.jar dev.rdmarun.scripts.AotTraining "$training"
train create -XX:AOTMode=create -XX:AOTConfiguration="$conf" -XX:AOTCache="$stage/app/rdma-run.aot" \
  -XX:+UnlockDiagnosticVMOptions -XX:-AOTAdapterCaching -cp /proc/self/fd/9/rdma-run.jar
rm "$conf"

# The man page, from the launcher's classes (scripts/.../ManPage.kt): every command's --help as this
# build prints it, the examples, files, exit statuses and environment.
"$stage/runtime/bin/java" --enable-native-access=ALL-UNNAMED -cp "$stage/app/rdma-run.jar" dev.rdmarun.scripts.ManPage "$version" "$(date -u +%Y-%m-%d)" \
  >"$stage/man/man1/rdma-run.1"

tar -C "$target/stage" -czf "$target/$name-linux-x64.tar.gz" "$name"
echo "dist: $target/$name-linux-x64.tar.gz ($(du -h "$target/$name-linux-x64.tar.gz" | cut -f1))"
