#!/usr/bin/env bash
# Fetches the real Nextflow engine, for the tests that trace a Nextflow pipeline (the demo
# needs none): the Maven Central artifacts pinned by tests/nextflow/pom.xml, copied once into
# the cache with their runtime dependencies, and an executable launcher beside them that runs
# nextflow.cli.Launcher on that classpath: offline, no plugins, no update check, plain log.
# Prints the launcher's path. Idempotent.
set -euo pipefail
say() { printf 'nextflow: %s\n' "$*" >&2; }
version=24.10.0 # keep in step with tests/nextflow/pom.xml
pom="$(cd "$(dirname "$0")/../tests/nextflow" && pwd)/pom.xml"
grep -q "<nextflow.version>$version</nextflow.version>" "$pom" ||
  { say "$pom does not pin $version"; exit 1; }
dir="${XDG_CACHE_HOME:-$HOME/.cache}/pipetrace/nextflow-$version"
lib="$dir/lib"
launcher="$dir/nextflow"

# A Java that Nextflow $version runs on (11 to 22): NXF_JAVA_HOME, JAVA_HOME, then `java`.
java_ok() { # $1: a java binary
  local v
  v=$("$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')
  [[ $v =~ ^(11|1[2-9]|2[0-2])$ ]]
}
java=''
for home in "${NXF_JAVA_HOME:-}" "${JAVA_HOME:-}"; do
  if [ -n "$home" ] && [ -x "$home/bin/java" ] && java_ok "$home/bin/java"; then
    java="$home/bin/java"; break
  fi
done
if [ -z "$java" ] && command -v java >/dev/null && java_ok "$(command -v java)"; then
  java="$(readlink -f "$(command -v java)")"
fi
[ -n "$java" ] || { say "no Java 11 to 22 found (set NXF_JAVA_HOME or JAVA_HOME)"; exit 1; }

if [ ! -f "$lib/nextflow-$version.jar" ]; then
  say "copying Nextflow $version and its runtime dependencies from Maven Central (about 30 seconds)"
  mkdir -p "$dir"
  rm -rf "$lib.tmp"
  mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$lib.tmp" >&2
  rm -rf "$lib"
  mv "$lib.tmp" "$lib"
fi

# Rewritten every time (it is tiny): it names the Java chosen above.
cat >"$launcher.tmp" <<EOF
#!/usr/bin/env bash
# Nextflow $version from Maven Central, written by pipetrace's scripts/nextflow.sh.
# Offline and without plugins: nothing is downloaded, nothing leaves the machine.
export NXF_HOME="\${NXF_HOME:-$dir/home}"
export NXF_OFFLINE=true
export NXF_DISABLE_CHECK_LATEST=true
export NXF_PLUGINS_DEFAULT=false
export NXF_ANSI_LOG=false
unset JAVA_TOOL_OPTIONS
# The JVM options and module openings of Nextflow's own launcher script, for Java 11 and later.
exec "$java" -Dfile.encoding=UTF-8 -Djava.awt.headless=true \\
  -Dcom.sun.security.enableAIAcaIssuers=true \\
  --add-opens=java.base/java.lang=ALL-UNNAMED \\
  --add-opens=java.base/java.io=ALL-UNNAMED \\
  --add-opens=java.base/java.nio=ALL-UNNAMED \\
  --add-opens=java.base/java.net=ALL-UNNAMED \\
  --add-opens=java.base/java.util=ALL-UNNAMED \\
  --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED \\
  --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED \\
  --add-opens=java.base/java.nio.file.spi=ALL-UNNAMED \\
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \\
  --add-opens=java.base/sun.nio.fs=ALL-UNNAMED \\
  --add-opens=java.base/sun.net.www.protocol.http=ALL-UNNAMED \\
  --add-opens=java.base/sun.net.www.protocol.https=ALL-UNNAMED \\
  --add-opens=java.base/sun.net.www.protocol.ftp=ALL-UNNAMED \\
  --add-opens=java.base/sun.net.www.protocol.file=ALL-UNNAMED \\
  --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED \\
  --add-opens=java.base/jdk.internal.vm=ALL-UNNAMED \\
  --add-opens=java.base/java.util.regex=ALL-UNNAMED \\
  \${NXF_OPTS:-} -cp '$lib/*' nextflow.cli.Launcher "\$@"
EOF
chmod +x "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
echo "$launcher"
