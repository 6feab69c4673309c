#!/usr/bin/env bash
# make_bundle.sh OUT.tar.gz STABLE_STATUS README -- FILE...
#
# Builds the relocatable bundle of //:bundle: a folder gemm-service/ with
# bin/ (the given programs and scripts), lib/ (every shared library the
# programs load that is not part of glibc, libstdc++, libgcc or CUDA), the
# README and a COMMIT file (from Bazel's stable status), packed as OUT.tar.gz. Each ELF program gets the
# rpath $ORIGIN/../lib, and each packed library $ORIGIN, so the bundle runs
# from wherever it is extracted, with no LD_LIBRARY_PATH. CUDA's libraries
# (cudart, cuBLAS, the driver) are left to the GPU host's own CUDA.
set -euo pipefail
out=$1 status=$2 readme=$3
shift 3
[ "$1" = "--" ] && shift

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/gemm-service
mkdir -p "$root/bin" "$root/lib"

# glibc, the C++ runtime and CUDA come from the host.
skip='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libdl\.so|/libpthread\.so|/librt\.so|/libutil\.so|/libresolv\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libnvidia|libnvrtc|libnvJitLink|libcupti'

for f in "$@"; do
  name=$(basename "$f")
  cp -L "$f" "$root/bin/$name"
  chmod 755 "$root/bin/$name"
  if ! head -c 4 "$root/bin/$name" | grep -q ELF; then
    continue  # a script
  fi
  if ldd "$f" | grep -q "not found"; then
    echo "make_bundle: $f has unresolved libraries:" >&2
    ldd "$f" | grep "not found" >&2
    exit 1
  fi
  ldd "$f" | awk '/=> \//{print $3}' | { grep -Ev "$skip" || true; } | while read -r lib; do
    [ -e "$root/lib/$(basename "$lib")" ] || cp -L "$lib" "$root/lib/"
  done
  patchelf --set-rpath '$ORIGIN/../lib' "$root/bin/$name"
done
for lib in "$root"/lib/*; do
  [ -e "$lib" ] || continue
  chmod 644 "$lib"
  patchelf --set-rpath '$ORIGIN' "$lib"
done
cp "$readme" "$root/README.md"
commit=$(sed -n 's/^STABLE_GIT_COMMIT //p' "$status")
echo "${commit:-unknown}" >"$root/COMMIT"
# Stable file order and times, so the same inputs give the same tarball.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  -C "$work" -czf "$out" gemm-service
