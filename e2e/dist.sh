#!/usr/bin/env bash
# The release archive, as a user gets it: unpacks dist/target/rdma-run-*-linux-x64.tar.gz into a
# temporary directory and, with no JDK to be found (JAVA_HOME unset, PATH without one), runs
# `rdma-run --version`, `rdma-run devices` (on a host without RDMA it exits 1 and lists soft0),
# the card sample on soft0 in loopback, and renders the man page; checks the man page's sections,
# that a stock Kotlin (`kotlin FILE.main.kts`: kotlinc's -script with main-kts) resolves a sample's
# @file:DependsOn from the archive's maven/ repository, in the README's two ways,
# that docs/ is there and that the README's links resolve in the archive, that the runtime loads
# the launcher's classes from the archive's AOT cache, there and after a move to another directory,
# and that it runs, quietly, with the cache unusable or removed. Run by .ci/run after the build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
archive=$(ls "$root"/dist/target/rdma-run-*-linux-x64.tar.gz 2>/dev/null | head -1)
[ -n "$archive" ] || { echo "dist.sh: no archive in dist/target: build first (./mvnw package)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$archive"
home=$(echo "$tmp"/rdma-run-*)
fail=0
check() { if "$@"; then echo "dist: ok: ${label}"; else echo "dist: FAILED: ${label}" >&2; fail=1; fi; }
user() { env -u JAVA_HOME PATH=/usr/bin:/bin RDMA_RUN_CACHE="$tmp/cache" "$home/bin/rdma-run" "$@"; }

label="no JDK inside (a runtime: no javac, no jmods)"
check test ! -e "$home/runtime/bin/javac" -a ! -d "$home/runtime/jmods"
label="--version with JAVA_HOME unset"
check bash -c "$(declare -f user); home='$home' tmp='$tmp'; user --version | grep -q '^rdma-run '"
label="devices lists soft0"
out=$(user devices 2>&1) && rc=0 || rc=$?
check bash -c "[ $rc -eq 0 ] || [ $rc -eq 1 ]; printf '%s' \"\$0\" | grep -q soft0" "$out"
# The README's install lines as written, with the archive and ~/.local/opt where this run has them.
label="the README's install lines, as written"
readme_lines=$(grep -E '^(mkdir -p ~/\.local/opt && tar -xzf rdma-run-|~/\.local/opt/rdma-run-)' "$root/README.md" | sed 's/ *#.*$//')
[ "$(wc -l <<<"$readme_lines")" -eq 2 ] || { echo "dist.sh: the README's install block is not two lines: $readme_lines" >&2; exit 2; }
mkdir -p "$tmp/readme/home"
out=$(cd "$(dirname "$archive")" && env -i PATH=/usr/bin:/bin HOME="$tmp/readme/home" \
  bash -euc "$(sed "s|~/\.local/opt|$tmp/readme/opt|g; s|rdma-run-[^ ]*-linux-x64\.tar\.gz|$(basename "$archive")|" <<<"$readme_lines")" 2>&1) && rc=0 || rc=$?
check bash -c "[ $rc -eq 0 ] && printf '%s' \"\$0\" | grep -q 'server and client succeeded'" "$out"
[ $fail -eq 0 ] || printf '%s\n' "$out" | tail -20 >&2
rm -rf "$tmp/readme"
label="the card sample on soft0, both sides"
out=$(user "$home/samples/card.main.kts" --loopback -d soft0 -n 100 2>&1) && rc=0 || rc=$?
check bash -c "[ $rc -eq 0 ] && printf '%s' \"\$0\" | grep -q 'loopback on soft0: server and client succeeded'" "$out"
[ $fail -eq 0 ] || printf '%s\n' "$out" | tail -20 >&2
if command -v groff >/dev/null; then
  label="the man page renders without warnings"
  check bash -c "[ -z \"\$(groff -man -Tutf8 -ww '$home/man/man1/rdma-run.1' 2>&1 >/dev/null)\" ]"
fi
label="the man page has EXAMPLES, FILES and EXIT STATUS"
check bash -c "for s in EXAMPLES FILES 'EXIT STATUS'; do grep -qx \".SH \$s\" '$home/man/man1/rdma-run.1' || exit 1; done"
label="docs/results-json.md is in the archive"
check test -s "$home/docs/results-json.md"
# What an archive user follows from the README (and the documents beside it) is in the archive.
label="every relative link of the archive's README.md and docs resolves in the archive"
links_ok() {
  local doc target missing=0
  for doc in "$home"/*.md "$home"/docs/*.md; do
    while IFS= read -r target; do
      target=${target%%#*}
      [ -z "$target" ] || [ -e "$(dirname "$doc")/$target" ] || { echo "dist.sh: ${doc#"$home"/} links to $target, not in the archive" >&2; missing=1; }
    done < <(grep -o '](\([^)]*\))' "$doc" | sed 's/^](\(.*\))$/\1/' | grep -Ev '^[a-z]+:' || true)
  done
  return $missing
}
check links_ok
unpacked=$(du -sh "$home" | cut -f1)

# A stock Kotlin, as `kotlin FILE.main.kts` runs it (kotlinc -script, main-kts's definition found
# on its classpath), from the launcher's lib/ of this build (the same Kotlin release), in a clean
# environment: env -i, a new user.home (main-kts's ~/.m2 is read from there, not from $HOME). Its
# settings mirror Maven Central to the build's local repository without dev/rdmarun, so the
# third-party jars resolve offline and rdma-run's can come only from the archive. The sample runs
# as far as `connect(peer)`, which names the missing peer: compiled, resolved and linked.
kotlin_home=$tmp/kotlin-user
stock_kotlin() { # HOME-like directory, script
  local lib="$root/scripts/target/lib" cp=""
  for j in kotlin-compiler-embeddable kotlin-stdlib kotlin-script-runtime kotlin-reflect kotlin-daemon-embeddable \
    kotlinx-coroutines-core-jvm kotlin-scripting-compiler-embeddable kotlin-scripting-compiler-impl-embeddable \
    kotlin-scripting-common kotlin-scripting-jvm; do cp=$cp:$(ls "$lib/$j"-[0-9]*.jar | head -1); done
  (cd "$1" && env -i PATH=/usr/bin:/bin HOME="$1" "$jdk/bin/java" -Duser.home="$1" --enable-native-access=ALL-UNNAMED \
    --sun-misc-unsafe-memory-access=allow -cp "${cp#:}" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler -no-stdlib \
    -cp "$(ls "$lib"/kotlin-main-kts-*.jar)" -script "$2" 2>&1)
}
jdk=$(. "$root/bin/jdk.sh" >/dev/null && echo "$JAVA_HOME")
m2=$(cd "$root" && ./mvnw -B -q -N help:evaluate -Dexpression=settings.localRepository -DforceStdout -o 2>/dev/null \
  || echo "$HOME/.m2/repository")
central="$tmp/central"
mkdir -p "$central/dev"
for d in "$m2"/*; do [ "$(basename "$d")" = dev ] || ln -s "$d" "$central/$(basename "$d")"; done
for d in "$m2"/dev/*; do [ "$(basename "$d")" = rdmarun ] || ln -s "$d" "$central/dev/$(basename "$d")"; done
fresh_user() {
  rm -rf "$kotlin_home" && mkdir -p "$kotlin_home/.m2"
  printf '<settings><mirrors><mirror><id>build-local</id><mirrorOf>central</mirrorOf><url>file://%s</url></mirror></mirrors></settings>\n' \
    "$central" >"$kotlin_home/.m2/settings.xml"
}
reached_connect() { grep -q 'the scenario reads `peer` but none was given' <<<"$out"; }
version=$(basename "$home" | sed 's/^rdma-run-//')
resolved="$kotlin_home/.m2/repository/dev/rdmarun/rdma-dsl/$version/rdma-dsl-$version.jar"
fresh_user
sed "/^@file:DependsOn/i @file:Repository(\"file://$home/maven\")" "$home/samples/card.main.kts" >"$kotlin_home/card.main.kts"
out=$(stock_kotlin "$kotlin_home" card.main.kts) || true
label="stock kotlin -script of the card sample, with @file:Repository on the archive's maven/"
check bash -c "$(declare -f reached_connect); out=\$0; reached_connect && cmp -s '$resolved' '$home/maven/dev/rdmarun/rdma-dsl/$version/rdma-dsl-$version.jar'" "$out"
[ $fail -eq 0 ] || printf '%s\n' "$out" | grep -v '^WARNING\|^\s*at ' | tail -20 >&2
fresh_user
mkdir -p "$kotlin_home/.m2/repository" && cp -r "$home/maven/." "$kotlin_home/.m2/repository/"
cp "$home/samples/card.main.kts" "$kotlin_home/"
out=$(stock_kotlin "$kotlin_home" card.main.kts) || true
label="stock kotlin -script of the card sample as shipped, with maven/ copied into ~/.m2/repository"
check bash -c "$(declare -f reached_connect); out=\$0; reached_connect" "$out"
[ $fail -eq 0 ] || printf '%s\n' "$out" | grep -v '^WARNING\|^\s*at ' | tail -20 >&2
rm -rf "$kotlin_home" "$central"

# The AOT cache, made in dist/target/stage: the class-loading log names it ("shared objects file")
# as the source of the launcher's classes, and after a move to another directory a script runs with
# them (the script host reads their code source, which JDK 25 derives from the paths the cache
# recorded).
traced() { out=$(RDMA_RUN_JAVA_OPTS=-Xlog:class+load=info user "$@" 2>&1) && rc=0 || rc=$?; }
from_cache() { [ "$rc" -eq 0 ] && grep -q '^\[.*\] dev\.rdmarun\.scripts\.MainKt source: shared objects file$' <<<"$out"; }
card_from_cache() { from_cache && grep -q 'loopback on soft0: server and client succeeded' <<<"$out"; }
traced --version
label="--version with the launcher's classes from the AOT cache"
check from_cache
mkdir -p "$tmp/moved/deeper" && mv "$home" "$tmp/moved/deeper/" && home=$(echo "$tmp"/moved/deeper/rdma-run-*)
cd "$tmp"
traced "$home/samples/card.main.kts" --loopback -d soft0 -n 10
label="moved to another directory, the card sample with its classes from the AOT cache"
check card_from_cache
[ $fail -eq 0 ] || printf '%s\n' "$out" | grep -v '\[class,load' | tail -20 >&2
# Without a usable cache it runs as before, and says nothing about it.
quiet() { out=$(user --version 2>"$tmp/err") && grep -q '^rdma-run ' <<<"$out" && [ ! -s "$tmp/err" ]; }
head -c 1000000 "$home/app/rdma-run.aot" >"$tmp/cut.aot" && mv "$tmp/cut.aot" "$home/app/rdma-run.aot"
label="--version with a truncated AOT cache, nothing on standard error"
check quiet
rm "$home/app/rdma-run.aot"
label="--version without the AOT cache, nothing on standard error"
check quiet
echo "dist: $(basename "$archive"): $(du -h "$archive" | cut -f1), unpacked $unpacked"
exit $fail
