#!/usr/bin/env bash
# Installs what gdaki needs to build and test on Debian 12 (run as root).
# Compiler, CMake, GoogleTest, rdma-core headers (layout checks, later the mlx5 provider),
# and the libraries later tools use; python3-jsonschema (the bench --json schema test),
# python3-matplotlib (bench/plot.py) and ucx-utils (bench/compare-ucx); the aarch64 cross
# toolchain and qemu-user for the aarch64 test pass. CUDA is optional
# and never installed here.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev rdma-core libfabric-dev
  nlohmann-json3-dev libcli11-dev
  python3 python3-jsonschema python3-matplotlib ucx-utils
  iproute2 procps ccache
  openmpi-bin libopenmpi-dev  # the communicator's MPI bootstrap and its tests; MPI_Alltoall in bench/comm_alltoall
  ibverbs-utils perftest  # unchanged RDMA programs run on the soft device (label verbs, docs/verbs.md)
  groff-base  # renders docs/man/gdaki.1 for its warnings test (tool.man_renders_without_warnings)
  clang libclang-rt-14-dev  # libFuzzer (clang -fsanitize=fuzzer) for tests/fuzz
  # aarch64 pass of scripts/test.sh: cross compiler (with binutils' objdump), qemu-user to
  # run the tests, GoogleTest's sources to build it for the target.
  g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user googletest
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all packages present"
