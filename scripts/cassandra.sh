#!/usr/bin/env bash
# Runs the project's real single-node Apache Cassandra 5.0.x without Docker: the jars come from
# Maven Central (tools/cassandra/pom.xml) and the JVM is started here, on 127.0.0.1.
# See docs/cassandra.md.
#
# Usage: scripts/cassandra.sh fetch|start|stop|status|wait|drain|kill|logs [-f] [system|tombstones|stdout]|nodetool ARGS...
#        scripts/cassandra.sh cluster-start [K...]|cluster-stop [K...]|cluster-restart [K...]|cluster-kill K...
#                             |cluster-status|cluster-wipe|cluster-nodetool K ARGS...|cluster-logs K [-f] [system|...]
#
# The cluster-* commands run a cluster of N nodes (default 3) on 127.0.0.2 ... 127.0.0.(N+1), ports
# 9042/7000 on each address and JMX 7200+K on 127.0.0.1, cluster name retryring-cluster, every node a
# seed, one token a node spread evenly per datacenter, auto_bootstrap: false, 512M heaps,
# GossipingPropertyFileSnitch (datacenters dc1, dc2, ...; rack1). Node K lives in
# .cassandra-cluster/nodeK and shares the jars of .cassandra/lib. cluster-start starts the nodes
# given (all by default) together and waits until each answers CQL and every running node sees
# every running node up (nodetool status); cluster-kill is SIGKILL; cluster-restart K stops and
# starts K; cluster-wipe deletes the stopped cluster's data. Status exits 0 all up, 3 none running.
#   CASSANDRA_CLUSTER_NODES    [3]    nodes, 1 to 20
#   CASSANDRA_CLUSTER_DCS      [1]    datacenters: the nodes split in contiguous blocks dc1, dc2, ...
#                                     (2 with 3 nodes: nodes 1-2 in dc1, node 3 in dc2)
#   CASSANDRA_CLUSTER_DIR      [<repo>/.cassandra-cluster]
#   CASSANDRA_CLUSTER_HEAP     [512M]
#   CASSANDRA_CLUSTER_RING_TIMEOUT [120]  seconds cluster-start allows the ring to show every node up
#   CASSANDRA_CLUSTER_FIRST_ADDRESS [2]   node K listens on 127.0.0.(this + K - 1)
#   CASSANDRA_LIB_DIR is shared by every node; CASSANDRA_START_TIMEOUT [300 here] applies to each node.
#
# Environment (defaults in brackets):
#   CASSANDRA_HOME_DIR         [<repo>/.cassandra]  lib/ data/ conf/ log/ cassandra.pid live here
#   CASSANDRA_LIB_DIR          [$CASSANDRA_HOME_DIR/lib]
#   CASSANDRA_VERSION          [the pom's cassandra.version]
#   CASSANDRA_LISTEN_ADDRESS   [127.0.0.1]
#   CASSANDRA_PORT             [9042]  native (CQL) port
#   CASSANDRA_STORAGE_PORT     [7000]  inter-node port
#   CASSANDRA_JMX_PORT         [7199]  local JMX (nodetool)
#   CASSANDRA_CLUSTER_NAME     [retryring]
#   CASSANDRA_COMMITLOG_SYNC   [periodic]  periodic | batch (an acknowledged write is fsynced) | group
#   CASSANDRA_TOMBSTONE_WARN   [1000]
#   CASSANDRA_TOMBSTONE_FAIL   [100000]
#   CASSANDRA_HEAP             [1G]
#   CASSANDRA_START_TIMEOUT    [180]  seconds that start/wait allow for CQL to answer
#   CASSANDRA_STOP_TIMEOUT     [90]   seconds that stop allows before kill -9
#   JAVA                       [$JAVA_HOME/bin/java, else java on PATH]  JDK 11 or 17
#
# Client encryption and authentication (off unless set; docs/cassandra.md, "TLS and authentication"):
#   CASSANDRA_TLS_CERT         PEM certificate (chain) of the node; with CASSANDRA_TLS_KEY turns on
#                              client_encryption_options (enabled, optional: false: plain CQL is refused)
#   CASSANDRA_TLS_KEY          PEM private key of that certificate, unencrypted
#   CASSANDRA_TLS_CA           PEM CA certificates that client certificates must chain to [the node's
#                              own certificate: Cassandra's PEM factory insists on a truststore]
#   CASSANDRA_TLS_CLIENT_AUTH  [true when CASSANDRA_TLS_CA is set, else false]  require_client_auth
#                              (a boolean in 5.0). When true, the readiness probe presents the node's own
#                              certificate, so it must chain to CASSANDRA_TLS_CA.
#   CASSANDRA_AUTH             [none]  password: PasswordAuthenticator, CassandraAuthorizer and
#                              CassandraRoleManager; the default superuser is cassandra/cassandra
#   CASSANDRA_SUPERUSER_PASSWORD [cassandra]  what the readiness probe logs in with
# A second node beside the default one needs its own CASSANDRA_HOME_DIR and address (all of 127/8 is
# loopback), e.g. CASSANDRA_HOME_DIR=.cassandra-tls CASSANDRA_LISTEN_ADDRESS=127.0.0.2 CASSANDRA_PORT=9142
# CASSANDRA_STORAGE_PORT=7100 CASSANDRA_JMX_PORT=7299 CASSANDRA_LIB_DIR=.cassandra/lib (the jars are shared).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$REPO_ROOT/tools/cassandra/pom.xml"

HOME_DIR="${CASSANDRA_HOME_DIR:-$REPO_ROOT/.cassandra}"
mkdir -p "$HOME_DIR"
HOME_DIR="$(cd "$HOME_DIR" && pwd)"
LIB_DIR="${CASSANDRA_LIB_DIR:-$HOME_DIR/lib}"
DATA_DIR="$HOME_DIR/data"
CONF_DIR="$HOME_DIR/conf"
LOG_DIR="$HOME_DIR/log"
# The cluster-* commands build cqlping once for all their nodes.
BIN_DIR="${CASSANDRA_BIN_DIR:-$HOME_DIR/bin}"
PID_FILE="$HOME_DIR/cassandra.pid"
LOCK_FILE="$HOME_DIR/.lock"
MARKER="$LIB_DIR/.complete"

LISTEN="${CASSANDRA_LISTEN_ADDRESS:-127.0.0.1}"
PORT="${CASSANDRA_PORT:-9042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
JMX_PORT="${CASSANDRA_JMX_PORT:-7199}"
CLUSTER_NAME="${CASSANDRA_CLUSTER_NAME:-retryring}"
# Set by the cluster-* commands for each node they start (a node alone leaves them unset).
SEEDS="${CASSANDRA_SEEDS:-$LISTEN:$STORAGE_PORT}"
INITIAL_TOKEN="${CASSANDRA_INITIAL_TOKEN:-0}"
AUTO_BOOTSTRAP="${CASSANDRA_AUTO_BOOTSTRAP:-}"
DC="${CASSANDRA_DC:-}"
RACK="${CASSANDRA_RACK:-rack1}"
COMMITLOG_SYNC="${CASSANDRA_COMMITLOG_SYNC:-periodic}"
TOMBSTONE_WARN="${CASSANDRA_TOMBSTONE_WARN:-1000}"
TOMBSTONE_FAIL="${CASSANDRA_TOMBSTONE_FAIL:-100000}"
HEAP="${CASSANDRA_HEAP:-1G}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-180}"
STOP_TIMEOUT="${CASSANDRA_STOP_TIMEOUT:-90}"
ADDR="$LISTEN:$PORT"
TLS_CERT="${CASSANDRA_TLS_CERT:-}"
TLS_KEY="${CASSANDRA_TLS_KEY:-}"
TLS_CA="${CASSANDRA_TLS_CA:-}"
TLS_CLIENT_AUTH="${CASSANDRA_TLS_CLIENT_AUTH:-}"
AUTH="${CASSANDRA_AUTH:-none}"

log() { echo "cassandra.sh: $*" >&2; }
die() { log "$*"; exit 1; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# with_lock runs "$@" holding the home dir lock, so that two `make cassandra-start` at once
# cannot launch two JVMs.
with_lock() {
  exec 9>"$LOCK_FILE"
  flock -w $((START_TIMEOUT + 60)) 9 || die "another cassandra.sh holds $LOCK_FILE"
  "$@"
}

pom_version() {
  sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$POM" | head -n1
}
wanted_version() { echo "${CASSANDRA_VERSION:-$(pom_version)}"; }

# ---------------------------------------------------------------- fetch

lib_complete() {
  [[ -f "$MARKER" ]] && [[ "$(cat "$MARKER")" == "cassandra-all $(wanted_version)" ]]
}

cmd_fetch() {
  local v; v="$(wanted_version)"
  if lib_complete; then
    log "lib dir complete: $LIB_DIR (cassandra-all $v, $(ls "$LIB_DIR"/*.jar | wc -l) jars)"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found: install Maven (it fetches the jars from Maven Central)"
  # A lib dir of another version (or a half copy of one) must not stay on the classpath.
  if [[ -d "$LIB_DIR" ]] && ls "$LIB_DIR"/cassandra-all-*.jar >/dev/null 2>&1 \
     && ! [[ -f "$LIB_DIR/cassandra-all-$v.jar" ]]; then
    running && die "Cassandra is running on the jars in $LIB_DIR: stop it before switching to $v"
    log "removing jars of another Cassandra version from $LIB_DIR"
    rm -f "$LIB_DIR"/*.jar "$MARKER"
  fi
  mkdir -p "$LIB_DIR"
  log "fetching cassandra-all $v and its runtime dependencies from Maven Central into $LIB_DIR"
  local t0; t0="$(now)"
  # Maven 3.8 prints colour codes even with -B -q; strip them (pipefail keeps mvn's status).
  mvn -B -q -f "$POM" -Dcassandra.version="$v" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIB_DIR" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2 \
    || die "mvn failed to fetch cassandra-all $v (see the output above)"
  [[ -f "$LIB_DIR/cassandra-all-$v.jar" ]] || die "cassandra-all-$v.jar missing in $LIB_DIR after mvn"
  ls "$LIB_DIR"/jamm-*.jar >/dev/null 2>&1 || die "jamm jar missing in $LIB_DIR after mvn"
  echo "cassandra-all $v" >"$MARKER"
  log "fetched $(ls "$LIB_DIR"/*.jar | wc -l) jars in $(since "$t0") s"
}

# ---------------------------------------------------------------- process helpers

pid_of() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid; pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # Ours only: a CassandraDaemon whose command line names this home dir.
  local cmdline
  # (stderr first: bash applies redirections left to right, and a stale pid has no /proc entry)
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmdline" == *CassandraDaemon* && "$cmdline" == *"-Dcassandra.storagedir=$DATA_DIR "* ]] || return 1
  echo "$pid"
}

running() { pid_of >/dev/null; }

# pid_alive: the process of the pid file exists, whatever its command line. Right after start its
# command line may still be the shell's that forked it (the exec of java has not happened yet on a
# busy machine): wait_ready must not take that for a JVM that died (a cluster start once failed so,
# while the node went on to start).
pid_alive() {
  local pid; pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

cqlping_bin() {
  local bin="$BIN_DIR/cqlping" src="$REPO_ROOT/testkit/cassandratest/cmd/cqlping"
  if [[ ! -x "$bin" || -n "$(find "$src" -newer "$bin" -name '*.go' 2>/dev/null)" ]]; then
    mkdir -p "$BIN_DIR"
    (cd "$REPO_ROOT" && go build -o "$bin" ./testkit/cassandratest/cmd/cqlping) >&2 || return 1
  fi
  echo "$bin"
}

# probe_args are cqlping's flags for the node as its running yaml configures it (not as the
# environment asks), so that status and wait work on an encrypted node without its settings.
probe_args() {
  local yaml="$CONF_DIR/cassandra.yaml"
  [[ -f "$yaml" ]] || return 0
  if grep -q '^# client encryption: on' "$yaml"; then
    # Readiness only: the node's own keystore (key and certificate in one PEM file) is the
    # client certificate, and the server certificate is not verified.
    echo "-tls-insecure -cert $CONF_DIR/client-keystore.pem -key $CONF_DIR/client-keystore.pem"
  fi
  if grep -q '^authenticator: PasswordAuthenticator' "$yaml"; then
    echo "-username cassandra"
  fi
}

# security_summary names what the running yaml turns on, for the start and status lines.
security_summary() {
  local yaml="$CONF_DIR/cassandra.yaml" out=""
  if grep -q '^# client encryption: on' "$yaml" 2>/dev/null; then
    out=", client TLS (require_client_auth: $(awk '/^  require_client_auth:/ {print $2; exit}' "$yaml"))"
  fi
  if grep -q '^authenticator: PasswordAuthenticator' "$yaml" 2>/dev/null; then
    out="$out, PasswordAuthenticator"
  fi
  echo "$out"
}

# ping succeeds when a CQL session reads system.local; it prints release_version.
ping() {
  local bin
  if bin="$(cqlping_bin 2>/dev/null)"; then
    # shellcheck disable=SC2046 # probe_args prints paths without spaces (the home dir's)
    CQLPING_PASSWORD="${CASSANDRA_SUPERUSER_PASSWORD:-cassandra}" \
      "$bin" -addr "$ADDR" -timeout "${1:-5s}" $(probe_args) 2>/dev/null
  else
    # No Go toolchain (or the build failed): an open native port is the best we can check.
    port_open "$LISTEN" "$PORT" && echo "unknown (port $PORT open; cqlping unavailable)"
  fi
}

show_failure_context() {
  log "last lines of $LOG_DIR/stdout.log:"
  tail -n 30 "$LOG_DIR/stdout.log" >&2 2>/dev/null || true
  log "last ERROR/WARN lines of $LOG_DIR/system.log:"
  grep -E "^(ERROR|WARN)" "$LOG_DIR/system.log" 2>/dev/null | tail -n 15 >&2 || true
}

# wait_ready waits until CQL answers, failing early when the JVM dies.
wait_ready() {
  local t0="$1" deadline v
  deadline=$(( $(date +%s) + START_TIMEOUT ))
  while :; do
    if ! running && ! pid_alive; then
      show_failure_context
      die "Cassandra exited during start (see $LOG_DIR)"
    fi
    if port_open "$LISTEN" "$PORT" && v="$(ping 5s)"; then
      echo "Cassandra $v ready on $ADDR after $(since "$t0") s (pid $(pid_of), commitlog_sync $(grep -m1 '^commitlog_sync:' "$CONF_DIR/cassandra.yaml" | awk '{print $2}'), tombstone_warn_threshold $(grep -m1 '^tombstone_warn_threshold:' "$CONF_DIR/cassandra.yaml" | awk '{print $2}')$(security_summary))"
      return 0
    fi
    if (( $(date +%s) >= deadline )); then
      show_failure_context
      die "Cassandra did not answer CQL on $ADDR within $START_TIMEOUT s (raise CASSANDRA_START_TIMEOUT?)"
    fi
    sleep 1
  done
}

# ---------------------------------------------------------------- config

java_bin() {
  if [[ -n "${JAVA:-}" ]]; then echo "$JAVA"
  elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then echo "$JAVA_HOME/bin/java"
  else command -v java || die "java not found: install JDK 17"
  fi
}

check_java() {
  local j="$1" v
  v="$("$j" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  case "$v" in
    11|11.*|17|17.*) ;;
    *) die "$j is Java $v; Cassandra 5.0 runs on JDK 11 or 17 (JDK 24+ refuses System.setSecurityManager). Set JAVA or JAVA_HOME." ;;
  esac
}

write_yaml() {
  local out="$1" sync_lines
  case "$COMMITLOG_SYNC" in
    # 5.0 has no commitlog_sync_batch_window_in_ms (4.x deprecated it; 5.0 refuses it as unknown).
    batch) sync_lines="commitlog_sync: batch" ;;
    group) sync_lines=$'commitlog_sync: group\ncommitlog_sync_group_window: '"${CASSANDRA_COMMITLOG_GROUP_WINDOW:-10ms}" ;;
    periodic) sync_lines=$'commitlog_sync: periodic\ncommitlog_sync_period: '"${CASSANDRA_COMMITLOG_SYNC_PERIOD:-10000ms}" ;;
    *) die "CASSANDRA_COMMITLOG_SYNC must be periodic, batch or group (got '$COMMITLOG_SYNC')" ;;
  esac
  cat >"$out" <<EOF
# Written by scripts/cassandra.sh on every start; edits are lost. See docs/cassandra.md.
cluster_name: '$CLUSTER_NAME'
num_tokens: 1
initial_token: $INITIAL_TOKEN
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: $(snitch)
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$SEEDS"
listen_address: $LISTEN
rpc_address: $LISTEN
storage_port: $STORAGE_PORT
start_native_transport: true
native_transport_port: $PORT
data_file_directories:
  - $DATA_DIR/data
commitlog_directory: $DATA_DIR/commitlog
hints_directory: $DATA_DIR/hints
saved_caches_directory: $DATA_DIR/saved_caches
cdc_raw_directory: $DATA_DIR/cdc_raw
$sync_lines
auto_snapshot: false
concurrent_compactors: 1
hinted_handoff_enabled: false
tombstone_warn_threshold: $TOMBSTONE_WARN
tombstone_failure_threshold: $TOMBSTONE_FAIL
EOF
  if [[ -n "$AUTO_BOOTSTRAP" ]]; then
    echo "auto_bootstrap: $AUTO_BOOTSTRAP" >>"$out"
  fi
  write_security_yaml >>"$out"
}

# snitch is SimpleSnitch (datacenter1, rack1) unless a datacenter is named: then
# GossipingPropertyFileSnitch, which reads conf/cassandra-rackdc.properties.
snitch() {
  if [[ -n "$DC" ]]; then echo GossipingPropertyFileSnitch; else echo SimpleSnitch; fi
}

write_rackdc() {
  [[ -n "$DC" ]] || return 0
  printf '# Written by scripts/cassandra.sh on every start.\ndc=%s\nrack=%s\n' "$DC" "$RACK" >"$1"
}

tls_on() { [[ -n "$TLS_CERT" || -n "$TLS_KEY" ]]; }

# client_auth is require_client_auth: as asked, else true exactly when a client CA is given.
client_auth() {
  if [[ -n "$TLS_CLIENT_AUTH" ]]; then echo "$TLS_CLIENT_AUTH"
  elif [[ -n "$TLS_CA" ]]; then echo true
  else echo false
  fi
}

# copy_tls_files stages the PEM files where the yaml points: Cassandra's PEMBasedSslContextFactory
# reads the private key and its certificate chain from one keystore file, and wants a truststore
# even when no client certificate is asked for.
copy_tls_files() {
  tls_on || return 0
  local f
  for f in "$TLS_CERT" "$TLS_KEY" ${TLS_CA:+"$TLS_CA"}; do
    [[ -r "$f" ]] || die "cannot read TLS file '$f'"
  done
  grep -q -- '-----BEGIN CERTIFICATE-----' "$TLS_CERT" || die "CASSANDRA_TLS_CERT $TLS_CERT holds no PEM certificate"
  grep -q -- '-----BEGIN .*PRIVATE KEY-----' "$TLS_KEY" || die "CASSANDRA_TLS_KEY $TLS_KEY holds no PEM private key"
  if grep -q -- '-----BEGIN ENCRYPTED PRIVATE KEY-----' "$TLS_KEY"; then
    die "CASSANDRA_TLS_KEY $TLS_KEY is encrypted; give it unencrypted"
  fi
  (umask 077 && cat "$TLS_KEY" "$TLS_CERT" >"$CONF_DIR/client-keystore.pem.new" \
    && cat "${TLS_CA:-$TLS_CERT}" >"$CONF_DIR/client-truststore.pem.new")
}

# install_tls_files moves the staged copies in place, once the node is known to be (re)started.
install_tls_files() {
  tls_on || return 0
  mv "$CONF_DIR/client-keystore.pem.new" "$CONF_DIR/client-keystore.pem"
  mv "$CONF_DIR/client-truststore.pem.new" "$CONF_DIR/client-truststore.pem"
}

drop_staged_tls_files() { rm -f "$CONF_DIR/client-keystore.pem.new" "$CONF_DIR/client-truststore.pem.new"; }

write_security_yaml() {
  if tls_on; then
    # The digest makes a running node with other certificates show up in start's settings diff.
    cat <<EOF
# client encryption: on (PEM files sha256 $(cat "$CONF_DIR/client-keystore.pem.new" "$CONF_DIR/client-truststore.pem.new" | sha256sum | cut -c1-16))
client_encryption_options:
  enabled: true
  optional: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: $CONF_DIR/client-keystore.pem
  truststore: $CONF_DIR/client-truststore.pem
  require_client_auth: $(client_auth)
EOF
  fi
  if [[ "$AUTH" == password ]]; then
    cat <<EOF
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
EOF
  fi
}

write_logback() {
  cat >"$1" <<EOF
<!-- Written by scripts/cassandra.sh on every start. system.log: INFO and above.
     tombstones.log: the WARN and ERROR lines of org.apache.cassandra.db.ReadCommand, i.e.
     "Read N live rows and M tombstone cells for query ... (see tombstone_warn_threshold)",
     and of org.apache.cassandra.service.StorageProxy, which reports reads aborted at
     tombstone_failure_threshold ("Scanned over N tombstones ... query aborted"). -->
<configuration scan="false">
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>$LOG_DIR/system.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>$LOG_DIR/system.log.%i</fileNamePattern>
      <minIndex>1</minIndex>
      <maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy">
      <maxFileSize>50MB</maxFileSize>
    </triggeringPolicy>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern>
    </encoder>
  </appender>
  <appender name="TOMBSTONES" class="ch.qos.logback.core.FileAppender">
    <file>$LOG_DIR/tombstones.log</file>
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter">
      <level>WARN</level>
    </filter>
    <encoder>
      <pattern>%-5level [%thread] %date{ISO8601} %logger - %msg%n</pattern>
    </encoder>
  </appender>
  <logger name="org.apache.cassandra.db.ReadCommand" level="INFO">
    <appender-ref ref="TOMBSTONES"/>
  </logger>
  <logger name="org.apache.cassandra.service.StorageProxy" level="INFO">
    <appender-ref ref="TOMBSTONES"/>
  </logger>
  <root level="INFO">
    <appender-ref ref="SYSTEMLOG"/>
  </root>
</configuration>
EOF
}

# JDK 17 module access for the server and nodetool alike: the list of Cassandra 5.0's
# conf/jvm17-server.options (plus java.nio). Without it the JVM stops at once with
# "FATAL: Cassandra is unable to access required classes" (IllegalAccessException on
# sun.nio.ch.DirectBuffer.cleaner).
JPMS_FLAGS=(
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
)

jvm_args() {
  local jamm
  jamm="$(ls "$LIB_DIR"/jamm-*.jar | head -n1)"
  JVM_ARGS=(
    -Xms"$HEAP" -Xmx"$HEAP" -Xss256k
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 -XX:MaxGCPauseMillis=300
    -XX:+UseThreadPriorities -XX:+PerfDisableSharedMem
    -XX:+HeapDumpOnOutOfMemoryError -XX:+ExitOnOutOfMemoryError -XX:HeapDumpPath="$LOG_DIR" -XX:ErrorFile="$LOG_DIR/hs_err_%p.log"
    -ea -da:net.openhft...
    -Djava.net.preferIPv4Stack=true
    -Djdk.attach.allowAttachSelf=true
    -javaagent:"$jamm"
    "${JPMS_FLAGS[@]}"
    -Dio.netty.tryReflectionSetAccessible=true
    -Dio.netty.allocator.useCacheForAllThreads=true
    -Dio.netty.allocator.maxOrder=11
    -Dcassandra.config="file://$CONF_DIR/cassandra.yaml"
    -Dcassandra-foreground=yes
    -Dcassandra.storagedir="$DATA_DIR"
    -Dcassandra.logdir="$LOG_DIR"
    -Dcassandra.triggers_dir="$CONF_DIR/triggers"
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.superuser_setup_delay_ms=0
    -Dcassandra.shutdown_announce_in_ms=0 # single node: nobody to tell; saves 2 s per stop
    -Dcassandra.jmx.local.port="$JMX_PORT"
    -Dlogback.configurationFile="file://$CONF_DIR/logback.xml"
  )
  if [[ -n "$DC" ]]; then
    JVM_ARGS+=(-Dcassandra-rackdc.properties="file://$CONF_DIR/cassandra-rackdc.properties")
  fi
}

# ---------------------------------------------------------------- commands

check_settings() {
  local n
  for n in PORT STORAGE_PORT JMX_PORT TOMBSTONE_WARN TOMBSTONE_FAIL START_TIMEOUT STOP_TIMEOUT; do
    [[ "${!n}" =~ ^[0-9]+$ ]] || die "CASSANDRA_$n must be a number (got '${!n}')"
  done
  [[ "$HEAP" =~ ^[0-9]+[kKmMgG]$ ]] || die "CASSANDRA_HEAP must look like 1G or 512M (got '$HEAP')"
  [[ "$AUTH" == none || "$AUTH" == password ]] || die "CASSANDRA_AUTH must be none or password (got '$AUTH')"
  if tls_on; then
    [[ -n "$TLS_CERT" && -n "$TLS_KEY" ]] || die "CASSANDRA_TLS_CERT and CASSANDRA_TLS_KEY go together"
  fi
  case "$(client_auth)" in
    true|false) ;;
    *) die "CASSANDRA_TLS_CLIENT_AUTH must be true or false (got '$TLS_CLIENT_AUTH')" ;;
  esac
}

do_start() {
  check_settings
  mkdir -p "$DATA_DIR" "$CONF_DIR/triggers" "$LOG_DIR"
  local yaml_new="$CONF_DIR/cassandra.yaml.new"
  copy_tls_files
  write_yaml "$yaml_new"
  lib_complete || cmd_fetch

  if running; then
    # start never restarts a running node (other test runs may be using it); it says so loudly.
    if ! cmp -s "$yaml_new" "$CONF_DIR/cassandra.yaml"; then
      log "WARNING: Cassandra (pid $(pid_of)) runs with other settings than asked for (< running, > asked):"
      diff "$CONF_DIR/cassandra.yaml" "$yaml_new" >&2 || true
      log "WARNING: keeping the running node; 'scripts/cassandra.sh stop' then 'start' applies the new settings"
    fi
    rm -f "$yaml_new"; drop_staged_tls_files
    if v="$(ping 5s)"; then
      echo "Cassandra $v already running on $ADDR (pid $(pid_of))"
      return 0
    fi
    log "Cassandra (pid $(pid_of)) is running but not answering yet; waiting"
    wait_ready "$(now)"
    return 0
  fi
  rm -f "$PID_FILE"
  if port_open "$LISTEN" "$PORT"; then
    rm -f "$yaml_new"; drop_staged_tls_files
    die "port $ADDR is already taken by another process (not the Cassandra of $HOME_DIR); set CASSANDRA_PORT"
  fi

  local java; java="$(java_bin)"; check_java "$java"
  mv "$yaml_new" "$CONF_DIR/cassandra.yaml"
  install_tls_files
  write_logback "$CONF_DIR/logback.xml"
  write_rackdc "$CONF_DIR/cassandra-rackdc.properties"
  jvm_args
  # Build the readiness checker before the JVM competes for the 2 cores.
  cqlping_bin >/dev/null || log "warning: cannot build cqlping; readiness falls back to an open port"

  local t0; t0="$(now)"
  echo "=== $(date -Is) start (commitlog_sync $COMMITLOG_SYNC, tombstone_warn_threshold $TOMBSTONE_WARN)" >>"$LOG_DIR/stdout.log"
  # setsid: the JVM outlives the make/shell that started it.
  setsid "$java" "${JVM_ARGS[@]}" -cp "$LIB_DIR/*" org.apache.cassandra.service.CassandraDaemon \
    </dev/null >>"$LOG_DIR/stdout.log" 2>&1 9>&- &
  echo $! >"$PID_FILE"
  log "started pid $! (home $HOME_DIR, log $LOG_DIR/system.log); waiting for CQL on $ADDR"
  wait_ready "$t0"
}

cmd_start() { with_lock do_start; }

do_stop() {
  local pid
  if ! pid="$(pid_of)"; then
    rm -f "$PID_FILE"
    echo "Cassandra not running ($HOME_DIR)"
    return 0
  fi
  local t0; t0="$(now)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(( $(date +%s) + STOP_TIMEOUT ))
  while kill -0 "$pid" 2>/dev/null; do
    if (( $(date +%s) >= deadline )); then
      log "pid $pid still alive after $STOP_TIMEOUT s; kill -9"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.5
  done
  rm -f "$PID_FILE"
  echo "Cassandra stopped (pid $pid, $(since "$t0") s)"
}

cmd_stop() { with_lock do_stop; }

do_kill() {
  local pid
  if ! pid="$(pid_of)"; then
    rm -f "$PID_FILE"
    echo "Cassandra not running ($HOME_DIR)"
    return 0
  fi
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  rm -f "$PID_FILE"
  echo "Cassandra killed with SIGKILL (pid $pid)"
}

cmd_kill() { with_lock do_kill; }

nodetool() {
  local java; java="$(java_bin)"
  # user.home: nodetool keeps its history in ~/.cassandra; keep it in the home dir instead.
  "$java" -Xmx256m -Xss256k -Djava.net.preferIPv4Stack=true "${JPMS_FLAGS[@]}" \
    -Duser.home="$HOME_DIR" \
    -Dlogback.configurationFile="file://$CONF_DIR/logback-tools.xml" \
    -cp "$LIB_DIR/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$JMX_PORT" "$@"
}

cmd_nodetool() {
  lib_complete || die "lib dir incomplete: run 'scripts/cassandra.sh fetch'"
  mkdir -p "$CONF_DIR"
  cat >"$CONF_DIR/logback-tools.xml" <<'EOF'
<configuration scan="false">
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
EOF
  nodetool "$@"
}

do_drain() {
  local pid
  if ! pid="$(pid_of)"; then
    echo "Cassandra not running ($HOME_DIR)"
    return 0
  fi
  local t0; t0="$(now)"
  cmd_nodetool drain || die "nodetool drain failed (JMX on 127.0.0.1:$JMX_PORT); use 'stop' or 'kill'"
  echo "nodetool drain done in $(since "$t0") s"
  do_stop
}

cmd_drain() { with_lock do_drain; }

cmd_wait() {
  running || die "Cassandra not running ($HOME_DIR): run 'scripts/cassandra.sh start'"
  wait_ready "$(now)"
}

cmd_status() {
  local pid v
  if ! pid="$(pid_of)"; then
    echo "Cassandra not running ($HOME_DIR)"
    return 3
  fi
  if v="$(ping 5s)"; then
    echo "Cassandra $v running on $ADDR (pid $pid, home $HOME_DIR, $(grep -m1 '^commitlog_sync:' "$CONF_DIR/cassandra.yaml"), $(grep -m1 '^tombstone_warn_threshold:' "$CONF_DIR/cassandra.yaml")$(security_summary))"
    return 0
  fi
  echo "Cassandra running (pid $pid) but not answering CQL on $ADDR"
  return 1
}

cmd_logs() {
  local follow=() which=system
  for a in "$@"; do
    case "$a" in
      -f) follow=(-f) ;;
      system|tombstones|stdout) which="$a" ;;
      *) die "usage: logs [-f] [system|tombstones|stdout]" ;;
    esac
  done
  local f="$LOG_DIR/$which.log"
  [[ -f "$f" ]] || die "no log yet: $f"
  tail -n 200 "${follow[@]}" "$f"
}

# ---------------------------------------------------------------- cluster
#
# A cluster of CASSANDRA_CLUSTER_NODES nodes on 127.0.0.2 and up, each a node of the commands above
# with its own home dir (.cassandra-cluster/nodeK): this script runs itself once per node with the
# node's environment. 127.0.0.1 stays the single node of `make test`; another cluster name and
# seeds only among the cluster's own nodes keep the two from ever gossiping.

CLUSTER_DIR="${CASSANDRA_CLUSTER_DIR:-$REPO_ROOT/.cassandra-cluster}"
CLUSTER_NODES="${CASSANDRA_CLUSTER_NODES:-3}"
CLUSTER_DCS="${CASSANDRA_CLUSTER_DCS:-1}"
CLUSTER_HEAP="${CASSANDRA_CLUSTER_HEAP:-512M}"
CLUSTER_RING_TIMEOUT="${CASSANDRA_CLUSTER_RING_TIMEOUT:-120}"
CLUSTER_FIRST_ADDRESS="${CASSANDRA_CLUSTER_FIRST_ADDRESS:-2}"
# Three JVMs starting at once on 2 shared cores took 171 s to answer CQL at load average 22.
CLUSTER_START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-300}"
# JMX listens on 127.0.0.1 whatever the node's address, so each node needs a port of its own:
# 7200+K (the shared node has 7199, cassandratest's TLS node 7299).
CLUSTER_JMX_BASE=7200
CLUSTER_NAME_OF_NODES=retryring-cluster

check_cluster_settings() {
  [[ "$CLUSTER_NODES" =~ ^[0-9]+$ ]] && (( CLUSTER_NODES >= 1 && CLUSTER_NODES <= 20 )) \
    || die "CASSANDRA_CLUSTER_NODES must be a number from 1 to 20 (got '$CLUSTER_NODES')"
  [[ "$CLUSTER_DCS" =~ ^[0-9]+$ ]] && (( CLUSTER_DCS >= 1 && CLUSTER_DCS <= CLUSTER_NODES )) \
    || die "CASSANDRA_CLUSTER_DCS must be a number from 1 to the node count $CLUSTER_NODES (got '$CLUSTER_DCS')"
  [[ "$CLUSTER_HEAP" =~ ^[0-9]+[kKmMgG]$ ]] || die "CASSANDRA_CLUSTER_HEAP must look like 1G or 512M (got '$CLUSTER_HEAP')"
  [[ "$CLUSTER_RING_TIMEOUT" =~ ^[0-9]+$ ]] || die "CASSANDRA_CLUSTER_RING_TIMEOUT must be a number (got '$CLUSTER_RING_TIMEOUT')"
  [[ "$CLUSTER_FIRST_ADDRESS" =~ ^[0-9]+$ ]] && (( CLUSTER_FIRST_ADDRESS >= 2 && CLUSTER_FIRST_ADDRESS <= 255 - CLUSTER_NODES )) \
    || die "CASSANDRA_CLUSTER_FIRST_ADDRESS must be a number from 2 to $(( 255 - CLUSTER_NODES )) (got '$CLUSTER_FIRST_ADDRESS'): 127.0.0.1 is the shared node's"
  mkdir -p "$CLUSTER_DIR"
  CLUSTER_DIR="$(cd "$CLUSTER_DIR" && pwd)" # node_running compares it with the JVM's command line
}

node_addr() { echo "127.0.0.$(( CLUSTER_FIRST_ADDRESS + $1 - 1 ))"; }
node_home() { echo "$CLUSTER_DIR/node$1"; }
node_log() { echo "$(node_home "$1")/log/system.log"; }

# node_dc splits the nodes into CLUSTER_DCS contiguous blocks: dc1 first.
node_dc() { echo "dc$(( ($1 - 1) * CLUSTER_DCS / CLUSTER_NODES + 1 ))"; }

# node_token spreads the tokens of each datacenter evenly over the Murmur3 ring (one token a
# node), each datacenter offset by its number so that no two nodes share a token: the usual
# layout for NetworkTopologyStrategy, which places the replicas of each datacenter on its own ring.
node_token() {
  local k="$1" dc i m=0 j=0
  dc="$(node_dc "$k")"
  for (( i = 1; i <= CLUSTER_NODES; i++ )); do
    [[ "$(node_dc "$i")" == "$dc" ]] || continue
    (( i < k )) && j=$(( j + 1 ))
    m=$(( m + 1 ))
  done
  # 2 * (j * (2^63-1)/m - 2^62) stays inside 64-bit arithmetic and spans [-2^63, 2^63).
  echo $(( 2 * (j * (9223372036854775807 / m) - 4611686018427387904) + ${dc#dc} - 1 ))
}

# cluster_seeds: every node is a seed. Seeds skip the shadow gossip round that a non-seed node
# needs a live seed for, so the nodes can start together and any one can restart alone; with
# auto_bootstrap: false and fixed tokens a seed has nothing to bootstrap anyway.
cluster_seeds() {
  local k out=""
  for (( k = 1; k <= CLUSTER_NODES; k++ )); do out="$out${out:+,}$(node_addr "$k"):7000"; done
  echo "$out"
}

# node_run runs this script for node K with the node's environment (and none of the TLS or
# authentication settings of a single node).
node_run() {
  local k="$1"; shift
  env -u CASSANDRA_TLS_CERT -u CASSANDRA_TLS_KEY -u CASSANDRA_TLS_CA -u CASSANDRA_TLS_CLIENT_AUTH -u CASSANDRA_AUTH \
    CASSANDRA_HOME_DIR="$(node_home "$k")" CASSANDRA_LIB_DIR="$LIB_DIR" CASSANDRA_BIN_DIR="$CLUSTER_DIR/bin" \
    CASSANDRA_LISTEN_ADDRESS="$(node_addr "$k")" CASSANDRA_PORT=9042 CASSANDRA_STORAGE_PORT=7000 \
    CASSANDRA_JMX_PORT=$(( CLUSTER_JMX_BASE + k )) CASSANDRA_HEAP="$CLUSTER_HEAP" \
    CASSANDRA_CLUSTER_NAME="$CLUSTER_NAME_OF_NODES" CASSANDRA_SEEDS="$(cluster_seeds)" \
    CASSANDRA_INITIAL_TOKEN="$(node_token "$k")" CASSANDRA_AUTO_BOOTSTRAP=false \
    CASSANDRA_DC="$(node_dc "$k")" CASSANDRA_RACK=rack1 CASSANDRA_START_TIMEOUT="$CLUSTER_START_TIMEOUT" \
    "${BASH_SOURCE[0]}" "$@"
}

# cluster_layout names what the data dirs were created for: a node refuses to start in another
# datacenter than the one its data says, and tokens differ with the node count.
cluster_layout() { echo "nodes=$CLUSTER_NODES dcs=$CLUSTER_DCS"; }

check_layout() {
  local f="$CLUSTER_DIR/layout"
  if [[ -f "$f" ]] && [[ "$(cat "$f")" != "$(cluster_layout)" ]]; then
    die "the cluster in $CLUSTER_DIR was created with $(cat "$f"), not $(cluster_layout): run 'scripts/cassandra.sh cluster-wipe' first (it deletes the cluster's data), or set CASSANDRA_CLUSTER_NODES / CASSANDRA_CLUSTER_DCS as it was"
  fi
  mkdir -p "$CLUSTER_DIR"
  cluster_layout >"$f"
}

# cluster_nodes prints the node numbers given ("1 3"), or all of them; it refuses others.
cluster_nodes() {
  if (( $# == 0 )); then seq 1 "$CLUSTER_NODES"; return; fi
  local k
  for k in "$@"; do
    [[ "$k" =~ ^[0-9]+$ ]] && (( k >= 1 && k <= CLUSTER_NODES )) || die "no node '$k': nodes are 1 to $CLUSTER_NODES"
    echo "$k"
  done
}

# node_running: as running() above, for node K.
node_running() {
  local home pid cmdline
  home="$(node_home "$1")"
  pid="$(cat "$home/cassandra.pid" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ "$cmdline" == *CassandraDaemon* && "$cmdline" == *"-Dcassandra.storagedir=$home/data "* ]]
}

# ring_up prints the nodes that node K's gossip shows up and normal, one address a line.
ring_up() {
  node_run "$1" nodetool status 2>/dev/null | awk '$1 == "UN" { sub(/:.*/, "", $2); print $2 }'
}

# wait_node_ring waits until node K sees every running node up (UN in its nodetool status), or
# says which it does not see by the deadline.
wait_node_ring() {
  local k="$1" deadline="$2" i up missing
  while :; do
    up="$(ring_up "$k" || true)"
    missing=""
    for (( i = 1; i <= CLUSTER_NODES; i++ )); do
      node_running "$i" || continue
      grep -qx "$(node_addr "$i")" <<<"$up" || missing="$missing node $i ($(node_addr "$i"))"
    done
    [[ -z "$missing" ]] && return 0
    if (( $(date +%s) >= deadline )); then
      node_run "$k" nodetool status >&2 || true
      log "node $k ($(node_addr "$k")) does not see as up:$missing, within $CLUSTER_RING_TIMEOUT s; logs: $(node_log "$k") and those of the nodes named"
      return 1
    fi
    sleep 2
  done
}

# wait_ring waits until every running node sees every running node up, asking them all at once
# (each ask is a nodetool JVM: seconds on a loaded machine).
wait_ring() {
  local t0="$1" deadline k failed=0
  deadline=$(( $(date +%s) + CLUSTER_RING_TIMEOUT ))
  declare -A pids
  for (( k = 1; k <= CLUSTER_NODES; k++ )); do
    node_running "$k" || continue
    wait_node_ring "$k" "$deadline" &
    pids[$k]=$!
  done
  for k in "${!pids[@]}"; do wait "${pids[$k]}" || failed=1; done
  (( failed == 0 )) || die "the ring did not form (see above)"
  echo "ring: every running node sees every running node up after $(since "$t0") s"
}

cmd_cluster_start() {
  check_cluster_settings
  check_layout
  lib_complete || with_lock cmd_fetch
  local nodes; nodes="$(cluster_nodes "$@")"
  # Build the readiness checker once, before the JVMs compete for the cores.
  BIN_DIR="$CLUSTER_DIR/bin" cqlping_bin >/dev/null || log "warning: cannot build cqlping; readiness falls back to an open port"
  local t0 k pid failed=0; t0="$(now)"
  declare -A pids
  for k in $nodes; do
    node_run "$k" start >"$CLUSTER_DIR/node$k.start.log" 2>&1 &
    pids[$k]=$!
  done
  for k in $nodes; do
    if wait "${pids[$k]}"; then
      echo "node $k ($(node_addr "$k"), $(node_dc "$k"), token $(node_token "$k")): $(tail -n1 "$CLUSTER_DIR/node$k.start.log")"
    else
      failed=1
      cat "$CLUSTER_DIR/node$k.start.log" >&2
      log "node $k ($(node_addr "$k")) did not come up: see its log $(node_log "$k") (and $(node_home "$k")/log/stdout.log)"
    fi
  done
  (( failed == 0 )) || die "cluster start failed (nodes that did start keep running: 'scripts/cassandra.sh cluster-stop')"
  wait_ring "$t0"
  echo "cluster of $CLUSTER_NODES nodes ($(cluster_layout)) ready in $(since "$t0") s; contact point $(node_addr 1):9042"
}

cmd_cluster_stop() {
  check_cluster_settings
  local nodes k; nodes="$(cluster_nodes "$@")"
  declare -A pids
  for k in $nodes; do
    node_run "$k" stop >"$CLUSTER_DIR/node$k.stop.log" 2>&1 &
    pids[$k]=$!
  done
  local failed=0
  for k in $nodes; do
    if wait "${pids[$k]}"; then echo "node $k: $(tail -n1 "$CLUSTER_DIR/node$k.stop.log")"
    else failed=1; cat "$CLUSTER_DIR/node$k.stop.log" >&2
    fi
  done
  return "$failed"
}

cmd_cluster_kill() {
  check_cluster_settings
  (( $# > 0 )) || die "usage: cluster-kill K [K...]"
  local nodes k
  nodes="$(cluster_nodes "$@")" # an assignment, so that a refusal ends the script
  for k in $nodes; do echo "node $k: $(node_run "$k" kill)"; done
}

# cmd_cluster_status: exit 0 when every node runs and answers CQL, 3 when none runs, 1 otherwise.
cmd_cluster_status() {
  check_cluster_settings
  local k rc=0 running=0 out first=""
  for (( k = 1; k <= CLUSTER_NODES; k++ )); do
    if out="$(node_run "$k" status)"; then
      running=$(( running + 1 )); first="${first:-$k}"
    else
      rc=1
      node_running "$k" && running=$(( running + 1 ))
    fi
    echo "node $k ($(node_dc "$k")): $out"
  done
  (( running == 0 )) && return 3
  [[ -n "$first" ]] && { echo "ring as node $first sees it:"; node_run "$first" nodetool status || rc=1; }
  return "$rc"
}

cmd_cluster_wipe() {
  check_cluster_settings
  local k
  for (( k = 1; k <= 20; k++ )); do
    if [[ -d "$(node_home "$k")" ]] && node_running "$k"; then
      die "node $k still runs: 'scripts/cassandra.sh cluster-stop' first"
    fi
  done
  for (( k = 1; k <= 20; k++ )); do rm -rf "$(node_home "$k")/data" "$CLUSTER_DIR/node$k".*.log; done
  rm -f "$CLUSTER_DIR/layout"
  echo "cluster data removed from $CLUSTER_DIR"
}

cmd_cluster_node() {
  local sub="$1" k="${2:-}"; shift 2 || die "usage: cluster-$sub K ..."
  check_cluster_settings
  k="$(cluster_nodes "$k")"
  node_run "$k" "$sub" "$@"
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  exit 2
}

main() {
  local cmd="${1:-}"; shift || true
  case "$cmd" in
    fetch) with_lock cmd_fetch ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    wait) cmd_wait ;;
    drain) cmd_drain ;;
    kill) cmd_kill ;;
    logs) cmd_logs "$@" ;;
    nodetool) cmd_nodetool "$@" ;;
    cluster-start) cmd_cluster_start "$@" ;;
    cluster-stop) cmd_cluster_stop "$@" ;;
    cluster-restart) cmd_cluster_stop "$@" && cmd_cluster_start "$@" ;;
    cluster-kill) cmd_cluster_kill "$@" ;;
    cluster-status) cmd_cluster_status ;;
    cluster-wipe) cmd_cluster_wipe ;;
    cluster-nodetool) cmd_cluster_node nodetool "$@" ;;
    cluster-logs) cmd_cluster_node logs "$@" ;;
    *) usage ;;
  esac
}

main "$@"
