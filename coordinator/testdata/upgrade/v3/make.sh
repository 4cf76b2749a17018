#!/usr/bin/env bash
# Writes this fixture: a 3-coordinator cluster of the release before issue 10 (commit 1c6a3a4)
# with five lease-only workers in two rings, a pause, a limit and a leave. See README.md.
#
#   RR=/tmp/rr-prev PROBE=/tmp/probe-prev ./make.sh OUTDIR
set -euo pipefail
out=$(realpath -m "$1")
RR=${RR:?old retryring binary} PROBE=${PROBE:?old leaseprobe binary}
logs=$(mktemp -d /tmp/fixture-logs.XXXX)
peers=c1=127.0.0.1:27401,c2=127.0.0.1:27402,c3=127.0.0.1:27403
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
mkdir -p "$out"
for i in 1 2 3; do
  RETRYRING_FIXTURE_SNAPSHOTS=1 "$RR" coordinator --node-id c$i --peers $peers \
    --raft-addr 127.0.0.1:2740$i --rsocket-addr 127.0.0.1:2741$i --http-addr 127.0.0.1:2742$i \
    --data-dir "$out/c$i" --log-level info 2>"$logs/c$i.log" &
  cpids[$i]=$!
  pids+=($!)
done
leader() {
  for i in 1 2 3; do
    l=$(curl -sf http://127.0.0.1:2742$i/v1/ring | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader_id"])' 2>/dev/null || true)
    if [ -n "$l" ]; then echo "${l#c}"; return; fi
  done
}
until [ -n "$(leader)" ]; do sleep 0.2; done
probe() { # id service
  "$PROBE" -worker-id "$1" -coordinators 127.0.0.1:27411,127.0.0.1:27412,127.0.0.1:27413 \
    -region eu -cluster k1 -service "$2" >"$logs/$1.out" 2>"$logs/$1.err" &
  pids+=($!)
  probes[${1#w}]=$!
}
probe w1 orders; probe w2 orders; probe w3 orders; probe w4 payments; probe w5 payments
sleep 15 # the new cluster's leader waits out every possible earlier lease before it assigns
ctl() { "$RR" ctl "$@" --coordinator http://127.0.0.1:2742$(leader) -o json >/dev/null; }
for n in 10 20 30 40 50 60 70 80 90 100 110 120; do ctl limit --ring eu/k1/payments --per-second $n; done
sleep 3 # a snapshot (every 16 entries, checked every 500 ms)
ls "$out"/c*/snapshots
ctl pause --ring eu/k1/orders --impl refund --reason "fixture pause"
ctl limit --ring eu/k1/payments --per-second 25
kill -TERM "${probes[2]}" # w2 leaves orders
sleep 4
curl -sf http://127.0.0.1:2742$(leader)/v1/ring | python3 -m json.tool >"$out/expected-view.json"
for i in 1 2 3; do kill -TERM "${cpids[$i]}"; done
wait "${cpids[1]}" "${cpids[2]}" "${cpids[3]}" || true
echo "logs in $logs"
