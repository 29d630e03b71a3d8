#!/usr/bin/env bash
# deploy/deps.sh — installs the Debian packages moewire needs (as root, via apt-get).
#   deploy/deps.sh          install whatever is missing (does nothing when all is present)
#   deploy/deps.sh --check  exit 0 when everything is present, 1 otherwise (prints what is missing)
set -euo pipefail

# pkg-config name -> Debian package
declare -A PC_PKG=(
  [libzmq]=libzmq3-dev
  [libprotobuf-c]=libprotobuf-c-dev
  [libuv]=libuv1-dev
  [liblz4]=liblz4-dev
  [libsodium]=libsodium-dev
  [jansson]=libjansson-dev
  [libcrypto]=libssl-dev
  [libpcre2-8]=libpcre2-dev
  [cmocka]=libcmocka-dev
)
# command -> Debian package
declare -A CMD_PKG=(
  [pkg-config]=pkg-config
  [protoc-c]=protobuf-c-compiler
  [gcc]=gcc
  [make]=make
  [aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu
  [qemu-aarch64]=qemu-user
  [ip]=iproute2
  [sha256sum]=coreutils
  [node]=nodejs
  [npm]=npm
  [dpkg-deb]=dpkg
  [clang-14]=clang-14
  [systemd-analyze]=systemd
  [curl]=curl
)

missing=()
for c in "${!CMD_PKG[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("${CMD_PKG[$c]}")
done
if command -v pkg-config >/dev/null 2>&1; then
  for p in "${!PC_PKG[@]}"; do
    pkg-config --exists "$p" 2>/dev/null || missing+=("${PC_PKG[$p]}")
  done
else
  missing+=("${PC_PKG[@]}")
fi
# file -> Debian package (llhttp ships as C sources the Makefile builds into the library)
declare -A FILE_PKG=(
  [/usr/share/llhttp/llhttp.c]=node-llhttp
  [/usr/share/include/llhttp/llhttp.h]=node-llhttp
)
for f in "${!FILE_PKG[@]}"; do
  [ -e "$f" ] || missing+=("${FILE_PKG[$f]}")
done
# the aarch64 C library headers for the NEON cross build
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || missing+=(libc6-dev-arm64-cross)
# libFuzzer's runtime for clang-14 (make fuzz, and the short fuzzing pass of make test)
compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null ||
  missing+=(libclang-rt-14-dev)

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "${1:-}" = "--check" ]; then
  echo "missing Debian packages: ${missing[*]}"
  exit 1
fi

echo "deploy/deps.sh: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deploy/deps.sh: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
echo "deploy/deps.sh: done" >&2
