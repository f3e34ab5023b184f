#!/bin/sh
# Install every Debian 12 package that lmpipe needs to build and test.
# The CUDA toolkit is not a Debian package: when nvcc is present the CUDA
# backend is built too (-Dcuda=auto).  libpcre2-dev is only for the
# tokenizer benchmark's PCRE2-JIT comparison; unicode-data only to regenerate
# lib/vocab/unicode-data.c (see docs/TOKENIZER.md).
set -eu
pkgs="build-essential meson ninja-build pkg-config
      libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libuv1-dev node-llhttp
      clang libclang-rt-14-dev python3 libpcre2-dev unicode-data"
# the web page's test: headless chromium driven from node over DevTools
pkgs="$pkgs chromium nodejs curl"
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
