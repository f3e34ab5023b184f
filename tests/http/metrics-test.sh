#!/bin/bash
# /metrics of `lmpipe up --http` parsed by python3-prometheus-client, and its
# counters against the requests run (metrics-test.py).  Debian's
# python3-prometheus-client is installed for Debian's /usr/bin/python3.
# With MODEL (a shared model's name) and REASON: that model, whose group's
# prefix cache is off for REASON (synth-qwen35-F32: recurrent_state).
# usage: metrics-test.sh LMPIPE SHARED_DIR [MODEL REASON]
set -u
lmpipe=$1
model=$2/models/${3:-stories260K}.gguf
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/lmpipe-metrics-test.XXXXXX)
up=
trap '[ -n "$up" ] && kill -TERM $up 2>/dev/null && wait $up; rm -rf "$work"' EXIT
. "$here/up-http.sh"
up_http || exit 1
timeout 120 /usr/bin/python3 "$here/metrics-test.py" "$base" "$key" ${4:+"$4"}
