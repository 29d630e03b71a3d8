#!/bin/sh
# deploy/deps.sh — installs what moewire needs to build and test: Debian packages through apt-get
# (as root, or with sudo), Homebrew formulae on macOS; elsewhere it prints what it would need.
# POSIX sh only: macOS runs it with its own old bash or zsh.
#   deploy/deps.sh          install whatever is missing (does nothing when all is present)
#   deploy/deps.sh --check  exit 0 when everything is present, 1 otherwise (prints what is missing)
#   deploy/deps.sh --print  print the install command for what is missing, install nothing
set -eu

mode=${1:-install}
os=$(uname -s)

# What is needed, one per line: kind (pc: a pkg-config name, cmd: a command, file: a path, arch:
# a foreign dpkg architecture), the name, the Debian package, the Homebrew formula (- where macOS
# needs none). The arm64 architecture lets apt fetch the arm64 libraries that tests/arm64/sysroot.sh
# unpacks into build/ for the aarch64 build of the node; no arm64 package is installed.
needs() {
  cat <<'EOF'
pc libzmq libzmq3-dev zeromq
pc libprotobuf-c libprotobuf-c-dev protobuf-c
pc libuv libuv1-dev libuv
pc liblz4 liblz4-dev lz4
pc libsodium libsodium-dev libsodium
pc jansson libjansson-dev jansson
pc libcrypto libssl-dev openssl@3
pc libpcre2-8 libpcre2-dev pcre2
pc cmocka libcmocka-dev cmocka
cmd pkg-config pkg-config pkg-config
cmd protoc-c protobuf-c-compiler protobuf-c
cmd make make -
cmd gcc gcc -
cmd node nodejs node
cmd npm npm node
cmd aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu -
cmd qemu-aarch64 qemu-user -
cmd ip iproute2 -
cmd tc iproute2 -
cmd sha256sum coreutils -
cmd dpkg-deb dpkg -
cmd clang-14 clang-14 -
cmd systemd-analyze systemd -
cmd curl curl -
file /usr/lib/python3/dist-packages/jinja2/__init__.py python3-jinja2 -
file /usr/share/llhttp/llhttp.c node-llhttp -
file /usr/share/include/llhttp/llhttp.h node-llhttp -
file /usr/aarch64-linux-gnu/include/stdio.h libc6-dev-arm64-cross -
glob /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a libclang-rt-14-dev -
pc libllhttp - llhttp
arch arm64 dpkg-arch:arm64 -
EOF
}

# Homebrew's openssl is keg-only: its pkg-config files are found through its prefix.
if [ "$os" = Darwin ] && command -v brew >/dev/null 2>&1; then
  PKG_CONFIG_PATH="$(brew --prefix openssl@3 2>/dev/null)/lib/pkgconfig:${PKG_CONFIG_PATH:-}"
  export PKG_CONFIG_PATH
fi

present() { # kind name
  case "$1" in
  pc) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$2" 2>/dev/null ;;
  cmd) command -v "$2" >/dev/null 2>&1 ;;
  file) [ -e "$2" ] ;;
  glob) for f in $2; do [ -e "$f" ] && return 0; done; return 1 ;;
  arch) ! command -v dpkg >/dev/null 2>&1 || dpkg --print-foreign-architectures | grep -qx "$2" ;;
  esac
}

missing=""
while read -r kind name deb brew; do
  if [ "$os" = Darwin ]; then pkg=$brew; else pkg=$deb; fi
  [ "$pkg" = - ] && continue
  present "$kind" "$name" && continue
  case " $missing " in *" $pkg "*) ;; *) missing="$missing $pkg" ;; esac
done <<EOF
$(needs)
EOF
missing=${missing# }

[ -z "$missing" ] && exit 0
case "$os" in
Darwin) cmd="brew install $missing" ;;
Linux)
  debs=$(echo "$missing" | sed 's/dpkg-arch:[^ ]*//g; s/^ *//')
  cmd="apt-get install -y --no-install-recommends $debs"
  [ -n "$debs" ] || cmd="apt-get update"
  case "$missing" in *dpkg-arch:arm64*) cmd="dpkg --add-architecture arm64 && $cmd" ;; esac
  ;;
*) cmd="" ;;
esac
if [ "$mode" = --check ]; then
  echo "missing ($os): $missing"
  exit 1
fi
if [ -z "$cmd" ] || [ "$mode" = --print ]; then
  if [ -n "$cmd" ]; then echo "$cmd"; else
    echo "deploy/deps.sh: no installer known for $os; moewire needs: $missing" >&2
    exit 1
  fi
  exit 0
fi

echo "deploy/deps.sh: $cmd" >&2
if [ "$os" = Darwin ]; then
  command -v brew >/dev/null 2>&1 || {
    echo "deploy/deps.sh: Homebrew is not installed (https://brew.sh); then: $cmd" >&2
    exit 1
  }
  # shellcheck disable=SC2086 # one word per formula
  brew install $missing >&2
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
      echo "deploy/deps.sh: not root and no sudo; install as root: $cmd" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  pkgs=""
  for p in $missing; do
    case "$p" in
    dpkg-arch:*) $SUDO dpkg --add-architecture "${p#dpkg-arch:}" >&2 ;;
    *) pkgs="$pkgs $p" ;;
    esac
  done
  $SUDO apt-get update -qq >&2
  # shellcheck disable=SC2086 # one word per package
  [ -z "$pkgs" ] || $SUDO apt-get install -y -qq --no-install-recommends $pkgs >&2
fi
echo "deploy/deps.sh: done" >&2
