#!/bin/bash
# stop-rgw.sh DIR [keep]  -- stop the daemons started by start-rgw.sh DIR (by PID, from the pid
# files in DIR/run: never by name, which would stop other clusters too), then remove DIR unless a
# second argument "keep" is given.
set -uo pipefail
DIR=${1:?usage: stop-rgw.sh DIR [keep]}
[ -d "$DIR/run" ] || { echo "no $DIR/run" >&2; exit 1; }
PIDS=()
# stop the S3 front end first, then mgr, osd, mon
for f in "$DIR/run/client.rgw.a.pid" "$DIR/run/mgr.x.pid" "$DIR"/run/osd.*.pid "$DIR/run/mon.a.pid"; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  # only signal it if that PID still is a ceph daemon (guards against a stale pid file / PID reuse)
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qE 'ceph-|radosgw'; then
    kill -TERM "$pid" 2>/dev/null && PIDS+=("$pid")
  fi
done
for pid in "${PIDS[@]}"; do
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "pid $pid still alive after 10s, KILL" >&2; kill -KILL "$pid"; fi
done
echo "stopped: ${PIDS[*]:-none}"
if [ "${2:-}" != keep ]; then rm -rf "$DIR"; fi
