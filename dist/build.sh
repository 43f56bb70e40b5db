#!/usr/bin/env bash
# Builds rdma-run-VERSION-linux-x64.tar.gz (run by dist/pom.xml in `package`):
#   dist/build.sh VERSION JAVA_HOME TARGET_DIR
# The archive holds a Java runtime made by jlink with the modules the jars need (no JDK where it is
# unpacked), the launcher's jars, bin/rdma-run, the samples, LICENSE, README.md and a man page
# generated from the commands' --help.
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

cp "$root/scripts/target/rdma-run.jar" "$stage/app/"
cp -r "$root/scripts/target/lib" "$stage/app/lib"
install -m 0755 "$here/rdma-run.sh" "$stage/bin/rdma-run"
cp "$root"/samples/*.main.kts "$stage/samples/"
cp "$root/LICENSE" "$root/README.md" "$stage/"

# The man page, from --help as this build prints it (so every option of every command is in it).
launch() { COLUMNS=80 "$stage/bin/rdma-run" "$@"; }
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
commands=$(launch --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
{
  echo ".TH RDMA-RUN 1 \"$(date -u +%Y-%m-%d)\" \"rdma-run $version\" \"User Commands\""
  echo ".SH NAME"
  echo "rdma-run \\- RDMA experiments from scenario scripts: run them, ping-pong, list devices and GIDs"
  echo ".SH SYNOPSIS"
  echo ".B rdma-run"
  echo "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]..."
  echo ".br"
  echo ".B rdma-run"
  echo "\\fIFILE.main.kts\\fR [\\fIOPTIONS\\fR] (short for \\fBrdma-run run\\fR \\fIFILE.main.kts\\fR)"
  echo ".SH DESCRIPTION"
  echo ".nf"
  launch --help | roff
  echo ".fi"
  echo ".SH COMMANDS"
  for c in $commands; do
    echo ".SS rdma-run $c"
    echo ".nf"
    launch "$c" --help | roff
    echo ".fi"
  done
  echo ".SH EXIT STATUS"
  echo "0 success; 1 the run failed (the cause on standard error); 2 the script does not compile or runs no rdma { };"
  echo "130 interrupted; n the script called System.exit(n)."
  echo ".SH ENVIRONMENT"
  echo ".TP"
  echo ".B RDMA_RUN_TOKEN"
  echo "the control connection's shared secret (--token)"
  echo ".TP"
  echo ".B RDMA_RUN_CACHE"
  echo "where compiled scripts are cached (default ~/.cache/rdma-run)"
  echo ".TP"
  echo ".B RDMA_RUN_JAVA_OPTS"
  echo "extra options for the bundled Java runtime"
  echo ".SH SEE ALSO"
  echo "ibv_rc_pingpong(1), ib_send_lat(1), ib_write_bw(1), ibv_devices(1), show_gids(8)"
} >"$stage/man/man1/rdma-run.1"

tar -C "$target/stage" -czf "$target/$name-linux-x64.tar.gz" "$name"
echo "dist: $target/$name-linux-x64.tar.gz ($(du -h "$target/$name-linux-x64.tar.gz" | cut -f1))"
