#!/usr/bin/env bash
# Is the build ready to publish? Uploads nothing. Run by .ci/run after the tests (about 2 min):
#   1. the effective POMs of the published modules (the parent, rdma-runtime, rdma-dsl) have what
#      Maven Central requires, with the project's own url and scm (not the artifactId appended);
#   2. a release build with -Prelease (Dokka's javadoc jars, GPG signatures) deployed to a
#      directory: every artifact is there with its sources and javadoc jars and a signature that
#      gpg verifies, made with a throwaway key in a temporary GNUPGHOME; the launcher, samples,
#      bench and archive modules deploy nothing;
#   3. `release:prepare -DdryRun=true` on a clone of HEAD: the release plugin rewrites the
#      versions (0.1.0-SNAPSHOT to 0.1.0, then the next snapshot) into pom.xml.tag files and
#      checks that nothing depends on a snapshot of another project; it commits, tags and pushes
#      nothing.
# Needs Maven Central (deploy and release refuse offline mode) and gpg.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
. bin/jdk.sh >/dev/null
tmp=$(mktemp -d)
trap 'gpgconf --homedir "$tmp/gnupg" --kill all >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
version=$(python3 -c 'import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).find("{http://maven.apache.org/POM/4.0.0}version").text)' pom.xml)
fail=0
bad() { echo "publish-check: FAILED: $*" >&2; fail=1; }
ok() { echo "publish-check: ok: $*"; }

# 1. Effective POMs.
url=https://github.com/rdma-run/rdma-run
for module in . runtime dsl; do
  pom="$tmp/effective-$(basename "$(realpath "$module")").xml"
  ./mvnw -B -q -N -f "$module/pom.xml" org.apache.maven.plugins:maven-help-plugin:3.5.2:effective-pom -Doutput="$pom" >/dev/null
  problems=$(python3 - "$pom" "$url" <<'PY'
import sys, xml.etree.ElementTree as E
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
p, url = E.parse(sys.argv[1]).getroot(), sys.argv[2]
def text(path):
    e = p.find(path, ns)
    return None if e is None or not (e.text or "").strip() else e.text.strip()
wanted = {"m:name": None, "m:description": None, "m:url": url, "m:scm/m:url": url,
          "m:scm/m:connection": "scm:git:" + url + ".git", "m:scm/m:developerConnection": None,
          "m:licenses/m:license/m:name": None, "m:developers/m:developer/m:name": None}
for path, value in wanted.items():
    got = text(path)
    if got is None: print("no " + path.replace("m:", ""))
    elif value is not None and got != value: print(path.replace("m:", "") + " is " + got + ", not " + value)
PY
)
  [ -z "$problems" ] || bad "$module's effective POM: $(tr '\n' ';' <<<"$problems")"
done
[ $fail -eq 0 ] && ok "effective POMs of the parent, rdma-runtime and rdma-dsl: name, description, url and scm (the project's own), licenses, developers"

# 2. A signed release build deployed to a directory.
export GNUPGHOME="$tmp/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-generate-key 'rdma-run publish check <publish-check@invalid>' ed25519 sign 1d 2>/dev/null
key=$(gpg --batch --list-keys --with-colons 2>/dev/null | awk -F: '/^fpr/ {print $10; exit}')
repo="$tmp/repository"
log="$tmp/deploy.log"
./mvnw -B -Prelease -DskipTests -Drdmarun.aot.skip=true -Drdmarun.dist.skip=true -Dgpg.keyname="$key" \
  -DaltDeploymentRepository="dry-run::file://$repo" -pl runtime,dsl -am deploy >"$log" 2>&1 \
  || { tail -30 "$log" >&2; bad "the -Prelease deploy to a directory"; exit 1; }
for spec in rdma-run-parent:.pom rdma-runtime:.pom rdma-runtime:.jar rdma-runtime:-sources.jar rdma-runtime:-javadoc.jar \
  rdma-dsl:.pom rdma-dsl:.jar rdma-dsl:-sources.jar rdma-dsl:-javadoc.jar; do
  a=${spec%%:*} suffix=${spec#*:}
  file=$(ls "$repo/dev/rdmarun/$a/$version/"*"$suffix" 2>/dev/null | grep -E -- "$a-[0-9.]+(-[0-9]{8}\.[0-9]{6}-[0-9]+|)$suffix\$" | head -1 || true)
  if [ -z "$file" ]; then bad "$a$suffix was not deployed"; continue; fi
  gpg --batch --quiet --verify "$file.asc" "$file" 2>/dev/null || bad "$(basename "$file"): no valid signature"
done
unzip -l "$(ls "$repo"/dev/rdmarun/rdma-dsl/"$version"/*-javadoc.jar | head -1)" index.html >/dev/null || bad "rdma-dsl's javadoc jar has no index.html"
others=$(ls "$repo/dev/rdmarun" | grep -vx 'rdma-run-parent\|rdma-runtime\|rdma-dsl' || true)
[ -z "$others" ] || bad "modules that are not published were deployed: $others"
[ $fail -eq 0 ] && ok "-Prelease deploy to a directory: parent, runtime and DSL with sources and javadoc jars, every file signed and verified"

# 3. The release plugin's dry run, on a clone of HEAD (it needs a working tree without changes).
git clone -q "$root" "$tmp/clone"
if (cd "$tmp/clone" && ./mvnw -B -q release:prepare -DdryRun=true -DpreparationGoals=validate \
    -DreleaseVersion="${version%-SNAPSHOT}" >"$tmp/release.log" 2>&1); then
  grep -q "<version>${version%-SNAPSHOT}</version>" "$tmp/clone/dsl/pom.xml.tag" \
    && [ -z "$(cd "$tmp/clone" && git tag)" ] \
    && ok "release:prepare -DdryRun=true: version ${version%-SNAPSHOT} in the pom.xml.tag files, no tag made" \
    || bad "release:prepare's dry run did not leave the release version in dsl/pom.xml.tag, or made a tag"
else
  tail -30 "$tmp/release.log" >&2
  bad "release:prepare -DdryRun=true"
fi
exit $fail
