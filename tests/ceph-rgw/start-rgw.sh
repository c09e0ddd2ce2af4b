#!/bin/bash
# start-rgw.sh DIR PORT
# A throwaway single-node Ceph cluster (one monitor [+ mgr], one memstore OSD) and its RADOS
# Gateway (beast frontend) on 127.0.0.1: a real S3 for the end-to-end tests (tests/e2e/s3.rs).
# Everything (config, data, logs, pid files, sockets) lives under DIR; stop-rgw.sh DIR stops
# the daemons and removes DIR. Prints KEY=VALUE lines (endpoint, keys, region, PIDs) when an S3
# request signed with the keys succeeds. Needs the Debian packages ceph-mon, ceph-osd, radosgw
# and ceph-common (radosgw-admin, ceph), and curl.
# Ceph-internal ports: mon v2=BASE_PORT, mon v1=BASE_PORT+1, osd/mgr bind range BASE_PORT+10..+29;
# BASE_PORT+2..+9 are free for PORT (the tests take all of them from one block of 30).
# Env: BASE_PORT (default 39700; two clusters at once need different values); S3_BUCKETS (bucket
#      names to create, separated by spaces: S3 clients such as object_store do not create
#      buckets); WITH_MGR (default 0: S3 works without ceph-mgr, health then says HEALTH_WARN
#      no active mgr; 1 starts one, ~300 MB more RSS); MEMSTORE_BYTES (default 2 GiB, the cap
#      of the objects the OSD keeps in RAM); S3_ACCESS_KEY / S3_SECRET_KEY; NICE (default 19);
#      KEEP_ON_FAIL=1 leaves the daemons running when the start fails.
set -euo pipefail

DIR=${1:?usage: start-rgw.sh DIR PORT}
PORT=${2:?usage: start-rgw.sh DIR PORT}
BASE_PORT=${BASE_PORT:-39700}
WITH_MGR=${WITH_MGR:-0}
MEMSTORE_BYTES=${MEMSTORE_BYTES:-2147483648}
S3_ACCESS_KEY=${S3_ACCESS_KEY:-AKIAIOSFODNN7EXAMPLE}
S3_SECRET_KEY=${S3_SECRET_KEY:-wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY}
S3_BUCKETS=${S3_BUCKETS:-}
NICE=${NICE:-19}
N="nice -n $NICE"

if (( PORT == BASE_PORT || PORT == BASE_PORT + 1 || (PORT >= BASE_PORT + 10 && PORT <= BASE_PORT + 29) )); then
  echo "PORT $PORT collides with ceph-internal ports $BASE_PORT, $((BASE_PORT + 1)), $((BASE_PORT + 10))..$((BASE_PORT + 29))" >&2
  exit 2
fi
if [ -e "$DIR/ceph.conf" ]; then
  echo "$DIR already holds a cluster; run stop-rgw.sh $DIR (it removes DIR) first" >&2; exit 2
fi

T0=$(date +%s.%N)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# on any failure: stop whatever was already started (by PID from DIR/run), keep DIR for the logs
on_exit() {
  rc=$?
  if [ "$rc" != 0 ] && [ "${KEEP_ON_FAIL:-0}" != 1 ]; then
    echo "[start-rgw] FAILED (rc=$rc), stopping started daemons; logs in $DIR/log" >&2
    for f in "$DIR"/run/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  fi
}
trap on_exit EXIT
mkdir -p "$DIR"/{log,run,mon,osd,mgr,crash,tmp}
export CEPH_CONF="$DIR/ceph.conf"
FSID=$(uuidgen)
MON_V2=127.0.0.1:$BASE_PORT
MON_V1=127.0.0.1:$((BASE_PORT + 1))

cat > "$CEPH_CONF" <<EOF
[global]
fsid = $FSID
mon host = [v2:$MON_V2,v1:$MON_V1]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv4 = true
ms bind ipv6 = false
ms bind port min = $((BASE_PORT + 10))
ms bind port max = $((BASE_PORT + 29))
auth cluster required = none
auth service required = none
auth client required = none
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
crash dir = $DIR/crash
tmp dir = $DIR/tmp
keyring = /dev/null
chdir = $DIR
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon max pg per osd = 1000
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 2
mon data avail crit = 1
mgr initial modules = iostat

[mon]
mon data = $DIR/mon
mon cluster log file = $DIR/log/mon-cluster.log
# The monitor batches map changes for paxos_propose_interval (1 s) before it commits them, and
# radosgw-admin, radosgw and the first bucket and object create a dozen pools one map change at
# a time: with the default, the start took 13-17 s and the first write to a new bucket 1 s.
# One monitor has nothing to batch for; with these the start takes under 2 s.
paxos propose interval = 0.05
paxos min wait = 0.01

[mgr]
mgr data = $DIR/mgr

[osd]
osd data = $DIR/osd
osd objectstore = memstore
memstore device bytes = $MEMSTORE_BYTES
osd class load list = *
osd class default list = *
osd memory target = 939524096
osd op num shards = 1
osd op num threads per shard = 2

[client.rgw.a]
# tcp_nodelay=1: without it a small GET took ~48 ms median (Nagle/delayed-ACK)
rgw frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw thread pool size = 64
rgw dns name = 127.0.0.1
# radosgw's built-in defaults are auth_client_required=cephx and ms_mon_client_mode=secure;
# with auth none, secure mode makes every mon connection fail with -13 (EACCES).
auth client required = none
ms mon client mode = crc
EOF

# Ceph daemons keep every inherited fd except 0-2 open after they daemonize; if the caller
# gave this script a pipe on another fd (bash process substitution, a test harness), that pipe
# never reaches EOF and the caller hangs. Start daemons with fds >2 closed, stdio to a file.
launch() {  # launch NAME CMD...
  local name=$1; shift
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec $N "$@" </dev/null >>"$DIR/log/$name.stdio" 2>&1
  )
}

echo "[start-rgw] mon mkfs" >&2
$N monmaptool --create --clobber --fsid "$FSID" --addv a "[v2:$MON_V2,v1:$MON_V1]" "$DIR/monmap" >/dev/null
$N ceph-mon --id a --mkfs --monmap "$DIR/monmap" --keyring /dev/null
launch mon.a ceph-mon --id a
if [ "$WITH_MGR" = 1 ]; then
  launch mgr.x ceph-mgr --id x
fi

echo "[start-rgw] osd" >&2
OSD_UUID=$(uuidgen)
OSD_ID=$($N ceph osd new "$OSD_UUID")
$N ceph-osd --id "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >>"$DIR/log/osd-mkfs.log" 2>&1
launch "osd.$OSD_ID" ceph-osd --id "$OSD_ID"
for i in $(seq 120); do
  $N ceph osd dump 2>/dev/null | grep -q "^osd.$OSD_ID up" && break
  [ "$i" = 120 ] && { echo "osd did not come up" >&2; exit 1; }
  sleep 0.5
done

echo "[start-rgw] radosgw" >&2
# radosgw-admin creates realm/zonegroup/zone + pools on first use; do it before radosgw
# starts so the two don't race on initialisation.
$N radosgw-admin user create --uid=tester --display-name=tester \
  --access-key="$S3_ACCESS_KEY" --secret-key="$S3_SECRET_KEY" >/dev/null
launch client.rgw.a radosgw -n client.rgw.a

for i in $(seq ${READY_TRIES:-240}); do
  # curl 7.88's --aws-sigv4 does not add x-amz-content-sha256; RGW then answers 403
  # SignatureDoesNotMatch, so send (and thereby sign) the header explicitly.
  if curl -sf -o /dev/null -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
       --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" "http://127.0.0.1:$PORT/"; then
    break
  fi
  [ "$i" = "${READY_TRIES:-240}" ] && { echo "radosgw did not answer a signed ListBuckets" >&2; exit 1; }
  sleep 0.25
done

# radosgw-admin of this Ceph version (16, pacific) has no `bucket create`: an S3 CreateBucket,
# signed like the request above. Creating a bucket the user already owns succeeds again.
for bucket in $S3_BUCKETS; do
  echo "[start-rgw] bucket $bucket" >&2
  curl -sSf -o /dev/null -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" "http://127.0.0.1:$PORT/$bucket"
done
T1=$(date +%s.%N)

PIDS=""
for f in "$DIR"/run/*.pid; do PIDS="$PIDS $(cat "$f")"; done
cat <<EOF
S3_ENDPOINT=http://127.0.0.1:$PORT
S3_ACCESS_KEY=$S3_ACCESS_KEY
S3_SECRET_KEY=$S3_SECRET_KEY
S3_REGION=us-east-1
CEPH_CONF=$CEPH_CONF
PIDS="${PIDS# }"
READY_SECS=$(awk "BEGIN{printf \"%.1f\", $T1 - $T0}")
EOF
