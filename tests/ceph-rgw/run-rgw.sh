#!/bin/bash
# run-rgw.sh DIR PORT -- start-rgw.sh DIR PORT (same environment), print its output, close
# stdout, then hold the cluster until stdin reaches end of file, and stop it with stop-rgw.sh DIR
# (which removes DIR).
#
# Why: a caller that keeps the write end of a pipe on this script's stdin gets the cluster
# stopped when it exits, however it exits (test passed, panicked, aborted, SIGKILL, Ctrl-C): the
# kernel closes the pipe. tests/e2e/s3.rs starts one cluster for its whole test process this way,
# since a process-wide value is never dropped. The caller should put this script in a process
# group of its own, so that a Ctrl-C meant for the caller does not kill it before it stopped the
# cluster.
#
# stdout reaches end of file when the start is over: the last line is READY_SECS=... if it
# succeeded. Then the caller may read DIR/log; the directory stays until stdin closes.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${1:?usage: run-rgw.sh DIR PORT}
PORT=${2:?usage: run-rgw.sh DIR PORT}

bash "$HERE/start-rgw.sh" "$DIR" "$PORT" 2>&1
# Nothing is written from here on: the reader may be gone, and a write would end this script
# by SIGPIPE before it stopped the cluster.
exec >/dev/null 2>&1
cat
exec bash "$HERE/stop-rgw.sh" "$DIR"
