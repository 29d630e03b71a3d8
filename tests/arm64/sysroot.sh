#!/usr/bin/env bash
# tests/arm64/sysroot.sh — a private aarch64 sysroot in build/arm64/root for the aarch64 build of
# the whole node (tests/arm64-check.sh): Debian's arm64 packages of the libraries moewire links
# (the -dev ones for headers and link names, their shared libraries and everything those need at
# run time, down to libc6 and its loader) fetched with `apt-get download` and unpacked with
# `dpkg -x`. Nothing is installed on the host; apt only has to know the arm64 architecture
# (deploy/deps.sh adds it). The sysroot's loader and libc come from one package, so qemu-aarch64
# -L build/arm64/root never mixes them with the host's (see tests/neon-check.sh).
# Exit 0 with build/arm64/root/.complete when done; 2 with the reason on stderr when the pieces
# to make it are missing (the caller skips); 1 on an unexpected failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=build/arm64
root=$out/root
# Link names and headers: the -dev packages of what the Makefile's PKGS and cmocka name.
dev=(libzmq3-dev libprotobuf-c-dev libuv1-dev liblz4-dev libsodium-dev libjansson-dev libssl-dev
     libpcre2-dev libcmocka-dev)
# Their shared libraries (plus libc6 for the loader), whose run-time closure is fetched too.
run=(libzmq5 libprotobuf-c1 libuv1 liblz4-1 libsodium23 libjansson4 libssl3 libpcre2-8-0
     libcmocka0 libc6)
want="${dev[*]} ${run[*]}"
if [ -f "$root/.complete" ] && [ "$(cat "$root/.complete")" = "$want" ]; then exit 0; fi

for c in apt-get apt-cache dpkg; do
  command -v "$c" >/dev/null 2>&1 || { echo "no $c (a Debian host is needed)" >&2; exit 2; }
done
dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64 || {
  echo "apt does not know the arm64 architecture (deploy/deps.sh adds it)" >&2
  exit 2
}
apt-cache show libzmq5:arm64 >/dev/null 2>&1 || {
  echo "apt has no arm64 package lists (run apt-get update after deploy/deps.sh)" >&2
  exit 2
}

# The run-time closure, arm64 packages only (architecture-independent ones hold no libraries).
mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${run[@]/%/:arm64}" 2>/dev/null |
  grep -v '^ ' | grep ':arm64$' | sort -u)
[ "${#closure[@]}" -gt 0 ] || { echo "apt-cache found no arm64 closure" >&2; exit 1; }
pkgs=("${dev[@]/%/:arm64}" "${closure[@]}")

rm -rf "$root" "$out/debs"
mkdir -p "$out/debs" "$root"
(cd "$out/debs" && timeout 600 apt-get download -q "${pkgs[@]}" >/dev/null) || {
  echo "apt-get download of ${#pkgs[@]} arm64 packages failed (no network to Debian?)" >&2
  exit 2
}
for deb in "$out"/debs/*.deb; do dpkg -x "$deb" "$root" || exit 1; done
rm -rf "$out/debs"
# Debian 12 is merged-/usr: the loader's path /lib/ld-linux-aarch64.so.1 is a link into usr/lib.
for d in lib bin sbin; do
  [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"
done
# No ld.so.cache of the sysroot's own: the loader finds its libraries through the multiarch
# default paths under the prefix, never through the host's cache.
mkdir -p "$root/etc" && : >"$root/etc/ld.so.cache"
echo "$want" >"$root/.complete"
echo "arm64 sysroot: ${#pkgs[@]} packages in $root ($(du -sh "$root" | cut -f1))" >&2
