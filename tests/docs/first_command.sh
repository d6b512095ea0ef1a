#!/usr/bin/env bash
# README's first command builds only what the main job needs (the `tool` preset: no tests,
# examples, benchmarks or CUDA checks) and runs the tool it built. Checked without the
# build itself: the README line names the preset and the binary, the preset configures
# into a scratch folder, and its build graph makes that binary.
# Usage: first_command.sh SOURCE_DIR
set -euo pipefail
src=$1
line=$(awk '/^```sh/{n++; next} n==1 && /^```/{exit} n==1' "$src/README.md" | head -1)
[[ $line == *"cmake --preset tool "* && $line == *"cmake --build --preset tool "* ]] ||
  { echo "README's first command does not configure and build the tool preset: $line"; exit 1; }
bin=$(grep -o '\./build/tool/[^ ]*' <<<"$line" | head -1)
[[ -n $bin ]] || { echo "README's first command does not run a binary from build/tool: $line"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$src"
cmake --preset tool -B "$scratch" >"$scratch.log" 2>&1 || { cat "$scratch.log"; rm -f "$scratch.log"; exit 1; }
rm -f "$scratch.log"
rel=${bin#./build/tool/}
ninja -C "$scratch" -t query "$rel" >/dev/null || { echo "the tool preset's build does not make $rel"; exit 1; }
if ninja -C "$scratch" -t targets all | grep -q '^tests/'; then
  echo "the tool preset builds tests: it should build only what the main job needs"; exit 1
fi
echo "README's first command: preset tool configures, and its build makes $rel and no test"
