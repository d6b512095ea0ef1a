#!/usr/bin/env bash
# usage: check_install.sh <build-dir> <scratch-dir> <consumer-source>
set -euo pipefail
build=$1 scratch=$2 consumer=$3
rm -rf "$scratch"
mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
# 1. CMake package with namespaced targets.
cmake -S "$consumer" -B "$scratch/consumer-build" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer-build" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib:${LD_LIBRARY_PATH:-}" "$scratch/consumer-build/gdaki_consumer"
# 2. pkg-config.
if ! command -v pkg-config >/dev/null; then
  echo "SKIP: pkg-config not installed"; exit 77
fi
pcdir=$(dirname "$(find "$scratch/prefix" -name gdaki.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs gdaki)
# shellcheck disable=SC2086
c++ "$consumer/consumer.cpp" $flags -o "$scratch/consumer-pc"
LD_LIBRARY_PATH="$scratch/prefix/lib:${LD_LIBRARY_PATH:-}" "$scratch/consumer-pc"
echo "install check: find_package and pkg-config consumers built and ran"
