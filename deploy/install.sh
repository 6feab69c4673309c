#!/usr/bin/env bash
# Installs gemm-service into a prefix, for programs built outside this
# workspace:
#
#   ./bazelw run //:install -- /opt/gemm-service
#
#   PREFIX/bin/gemm-server, PREFIX/bin/gemm-client
#   PREFIX/lib/libgemm_client.so         the C++ client library
#   PREFIX/include/gemm-service/...      its headers (#include "client/lib/gemm_client.h")
#   PREFIX/lib/pkgconfig/gemm_client.pc  pkg-config --cflags --libs gemm_client
#   PREFIX/lib/cmake/gemm_client/        find_package(gemm_client), target gemm::client
#   PREFIX/lib/libgemm_blas.so           the BLAS drop-in (README)
#
# The library links Debian's gRPC, protobuf and abseil; pkg-config names
# them (Requires), so a consumer needs their -dev packages. Libs carries an
# rpath to PREFIX/lib, so programs run without LD_LIBRARY_PATH.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: bazel run //:install -- PREFIX" >&2
  exit 2
fi
prefix=$1
case "$prefix" in /*) ;; *) prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix" ;; esac
# Run by `bazel run` (or a test) from the runfiles: every file at its
# workspace path.
here=${RUNFILES_DIR:-$0.runfiles}/gemm_service
[ -d "$here" ] || here=$PWD

# coreutils' install, named in full: a test's PATH may hold the runfiles,
# where this script is called `install` too.
put() { /usr/bin/install "$@"; }

version=$("$here/client/gemm-client" --version | awk '{print $NF}')
include=$prefix/include/gemm-service
mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/gemm_client" \
  "$include/client/lib" "$include/common" "$include/proto"
put -m 755 "$here/server/gemm-server" "$here/client/gemm-client" "$prefix/bin/"
put -m 755 "$here/client/lib/libgemm_client_shared.so" "$prefix/lib/libgemm_client.so"
put -m 755 "$here/client/blas/libgemm_blas.so" \
  "$prefix/lib/"
for h in call_tracker gemm_args gemm_client job_stream retry stream_job; do
  put -m 644 "$here/client/lib/$h.h" "$include/client/lib/"
done
put -m 644 "$here/common/gemm_problem.h" "$include/common/"
put -m 644 "$here/proto/wire_codec.h" "$here/proto/gemm.pb.h" \
  "$here/proto/gemm.grpc.pb.h" "$include/proto/"

cat > "$prefix/lib/pkgconfig/gemm_client.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include/gemm-service

Name: gemm_client
Description: C++ client of gemm-service (gemm.v1 over gRPC)
Version: $version
Requires: grpc++ protobuf absl_status absl_statusor absl_time absl_strings absl_synchronization
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lgemm_client
Cflags: -std=c++17 -I\${includedir}
PC

cat > "$prefix/lib/cmake/gemm_client/gemm_clientConfig.cmake" <<'CMAKE'
# find_package(gemm_client) for a gemm-service install: the imported target
# gemm::client, from the install's pkg-config file (which names gRPC,
# protobuf and abseil).
get_filename_component(_gemm_client_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_package(PkgConfig REQUIRED)
set(_gemm_client_pkg_config_path "$ENV{PKG_CONFIG_PATH}")
set(ENV{PKG_CONFIG_PATH} "${_gemm_client_prefix}/lib/pkgconfig:$ENV{PKG_CONFIG_PATH}")
pkg_check_modules(GEMM_CLIENT REQUIRED IMPORTED_TARGET gemm_client)
set(ENV{PKG_CONFIG_PATH} "${_gemm_client_pkg_config_path}")
if(NOT TARGET gemm::client)
  add_library(gemm::client INTERFACE IMPORTED)
  target_link_libraries(gemm::client INTERFACE PkgConfig::GEMM_CLIENT)
  target_compile_features(gemm::client INTERFACE cxx_std_17)
endif()
CMAKE

cat > "$prefix/lib/cmake/gemm_client/gemm_clientConfigVersion.cmake" <<CMAKE
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
echo "installed gemm-service $version in $prefix"
