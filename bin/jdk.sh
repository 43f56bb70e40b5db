# Sourced by ./mvnw and bin/rdma-run: selects a JDK >= 25 (FFM API, Kotlin jvmTarget 25)
# and exports JAVA_HOME and PATH. The machine's default java may be older (17 here).
#
# Order: $JAVA_HOME if it is a JDK >= 25, else the first JDK >= 25 matching
# $RDMA_RUN_JDK_SEARCH/*25* (default /usr/lib/jvm), else one line on stderr and status 1.
# RDMA_RUN_JDK_SEARCH exists so the "no JDK 25" path can be tested on a machine that has one:
#   JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 RDMA_RUN_JDK_SEARCH=/nonexistent ./mvnw -v
#
# POSIX sh, not bash: mvnw runs under /bin/sh (dash) with `set -euf`, so this file avoids
# bashisms, reads unset variables with ${x-}, and re-enables globbing only for its search.

# Major version of the JDK at $1, or nothing. Reads the `release` file: no JVM start.
_rdma_run_jdk_major() {
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] && [ -f "$1/release" ] || return 0
  sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release"
}

_rdma_run_jdk_ok() {
  _rdma_run_major=$(_rdma_run_jdk_major "$1")
  [ -n "$_rdma_run_major" ] && [ "$_rdma_run_major" -ge 25 ]
}

_rdma_run_jdk=
if [ -n "${JAVA_HOME-}" ] && _rdma_run_jdk_ok "$JAVA_HOME"; then
  _rdma_run_jdk=$JAVA_HOME
else
  case $- in *f*) _rdma_run_noglob=1; set +f ;; *) _rdma_run_noglob= ;; esac
  for _rdma_run_cand in "${RDMA_RUN_JDK_SEARCH:-/usr/lib/jvm}"/*25*; do
    if _rdma_run_jdk_ok "$_rdma_run_cand"; then _rdma_run_jdk=$_rdma_run_cand; break; fi
  done
  if [ -n "$_rdma_run_noglob" ]; then set -f; fi
fi

unset -f _rdma_run_jdk_major _rdma_run_jdk_ok
unset _rdma_run_major _rdma_run_cand _rdma_run_noglob

if [ -z "$_rdma_run_jdk" ]; then
  unset _rdma_run_jdk
  echo "rdma-run needs JDK 25: install Temurin 25 (apt-get install temurin-25-jdk from Adoptium) or set JAVA_HOME to a JDK 25." >&2
  # `return` when sourced; `exit` if someone runs this file directly.
  return 1 2>/dev/null || exit 1
fi

JAVA_HOME=$_rdma_run_jdk
PATH="$JAVA_HOME/bin:$PATH"
export JAVA_HOME PATH
unset _rdma_run_jdk
