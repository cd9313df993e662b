#!/bin/sh
# make bundle-deps: the static archives bundle executables link that Debian
# ships only as shared libraries (docs/bundle.md "What a bundle links"):
#   cJSON         libcjson-dev has no libcjson.a: cJSON.c from Debian's source
#                 package (apt-get source cjson, Debian's patches applied);
#   libmicrohttpd Debian's libmicrohttpd.a needs GnuTLS (shared only): built
#                 from Debian's source package without HTTPS (bundles serve
#                 plain HTTP on loopback or behind a TLS proxy);
# each for x86_64 (cc) and aarch64 (aarch64-linux-gnu-gcc) into
# $BUILD/deps/<target>/.  libsodium.a and libxxhash.a come from Debian's -dev
# packages (amd64, and arm64 through dpkg --add-architecture: make deps).
# Needs network and deb-src entries in APT's sources (added here when root):
# an install step like make deps, never run by make test.
set -eu
BUILD=${BUILD:-build}
DEPS="$BUILD/deps"
SRC="$DEPS/src"
JOBS=${JOBS:-2}
mkdir -p "$SRC"
SRC=$(cd "$SRC" && pwd)

have_src() { ls -d "$SRC/$1"-*/ >/dev/null 2>&1; }

if ! have_src cjson || ! have_src libmicrohttpd; then
  if ! apt-get source --download-only --print-uris cjson >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
      echo "bundle-deps: APT has no deb-src entries; as root: make bundle-deps (adds them), or add deb-src lines yourself" >&2
      exit 1
    fi
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > /etc/apt/sources.list.d/cinfer-deb-src.sources
    else
      grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' > /etc/apt/sources.list.d/cinfer-deb-src.list
    fi
    apt-get update -qq
  fi
  (cd "$SRC" && for p in cjson libmicrohttpd; do
     ls -d "$p"-*/ >/dev/null 2>&1 || apt-get source -qq "$p" >/dev/null 2>&1 || { echo "bundle-deps: apt-get source $p failed" >&2; exit 1; }
   done)
fi
CJSON=$(ls -d "$SRC"/cjson-*/ | head -1)
MHD=$(ls -d "$SRC"/libmicrohttpd-*/ | head -1)

for target in x86_64 aarch64; do
  out="$DEPS/$target"
  mkdir -p "$out"
  if [ "$target" = x86_64 ]; then cc=${CC:-cc}; host=x86_64-linux-gnu; else cc=aarch64-linux-gnu-gcc; host=aarch64-linux-gnu; fi
  if ! command -v "$cc" >/dev/null; then echo "bundle-deps: no $cc: skipping $target" >&2; continue; fi
  if [ ! -f "$out/libcjson.a" ]; then
    "$cc" -O2 -fPIC -ffunction-sections -fdata-sections -c "$CJSON/cJSON.c" -o "$out/cJSON.o"
    rm -f "$out/libcjson.a" && ar rcs "$out/libcjson.a" "$out/cJSON.o" && rm -f "$out/cJSON.o"
    echo "  DEPS    $out/libcjson.a"
  fi
  if [ ! -f "$out/libmicrohttpd.a" ]; then
    b="$DEPS/mhd-$target"
    rm -rf "$b" && mkdir -p "$b"
    (cd "$b" && CC="$cc" CFLAGS="-O2 -fPIC -ffunction-sections -fdata-sections" "$MHD/configure" --host="$host" \
       --enable-static --disable-shared --disable-https --without-gnutls --disable-doc --disable-examples \
       --disable-curl --disable-tools --disable-nls --disable-dauth --disable-bauth >configure.log 2>&1 \
     && make -s -j"$JOBS" -C src/microhttpd >make.log 2>&1) || { echo "bundle-deps: libmicrohttpd for $target failed (see $b/*.log)" >&2; exit 1; }
    cp "$b/src/microhttpd/.libs/libmicrohttpd.a" "$out/libmicrohttpd.a"
    echo "  DEPS    $out/libmicrohttpd.a"
  fi
done
