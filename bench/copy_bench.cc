// copy-bench: what PCIe carries between host memory and one GPU, the
// yardstick of the shared-memory regions' targets
// (docs/reference/performance.md): cudaMemcpy host-to-device and device-to-host
// of one buffer, from memory allocated pinned (cudaMallocHost), from a POSIX
// shared-memory mapping registered with cudaHostRegister (as gemm-server pins a
// system region), and from the same mapping unregistered (pageable). Prints one
// line per case and writes JSON with --json.
//
//   copy-bench --bytes 268435456 --repeats 10 --json copy.json
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "kernels/exit_on_cuda_error.h"
#include "nlohmann/json.hpp"

namespace {

// Median and best GB/s of `repeats` copies of `bytes`.
nlohmann::json Time(void* to, const void* from, size_t bytes,
                    cudaMemcpyKind kind, int repeats) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaMemcpy(to, from, bytes, kind));  // warm-up
  std::vector<double> gbps;
  for (int i = 0; i < repeats; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(cudaMemcpyAsync(to, from, bytes, kind));
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    gbps.push_back(bytes / (ms * 1e6));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(gbps.begin(), gbps.end());
  return {{"median_gbps", gbps[gbps.size() / 2]}, {"best_gbps", gbps.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{256} << 20;
  int repeats = 10;
  int device = 0;
  std::string json_path;
  CLI::App app{"copy-bench: cudaMemcpy between host memory and a GPU"};
  app.add_option("--bytes", bytes, "size of each copy")->capture_default_str();
  app.add_option("--repeats", repeats, "timed copies per case")
      ->capture_default_str();
  app.add_option("--device", device, "CUDA device")->capture_default_str();
  app.add_option("--json", json_path, "write the results as JSON");
  CLI11_PARSE(app, argc, argv);

  CHECK_CUDA(cudaSetDevice(device));
  void* gpu = nullptr;
  CHECK_CUDA(cudaMalloc(&gpu, bytes));
  void* pinned = nullptr;
  CHECK_CUDA(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 1, bytes);
  const std::string key = "/copy-bench-" + std::to_string(getpid());
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::perror("copy-bench: shm");
    return 1;
  }
  void* shm = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  shm_unlink(key.c_str());
  if (shm == MAP_FAILED) {
    std::perror("copy-bench: mmap");
    return 1;
  }
  std::memset(shm, 1, bytes);

  nlohmann::json out;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  out["device"] = prop.name;
  out["bytes"] = bytes;
  out["pageable_shm"] = {
      {"h2d", Time(gpu, shm, bytes, cudaMemcpyHostToDevice, repeats)},
      {"d2h", Time(shm, gpu, bytes, cudaMemcpyDeviceToHost, repeats)}};
  CHECK_CUDA(cudaHostRegister(shm, bytes, cudaHostRegisterPortable));
  out["registered_shm"] = {
      {"h2d", Time(gpu, shm, bytes, cudaMemcpyHostToDevice, repeats)},
      {"d2h", Time(shm, gpu, bytes, cudaMemcpyDeviceToHost, repeats)}};
  CHECK_CUDA(cudaHostUnregister(shm));
  out["pinned"] = {
      {"h2d", Time(gpu, pinned, bytes, cudaMemcpyHostToDevice, repeats)},
      {"d2h", Time(pinned, gpu, bytes, cudaMemcpyDeviceToHost, repeats)}};
  for (const char* memory : {"pinned", "registered_shm", "pageable_shm"}) {
    std::printf(
        "%-15s h2d %6.1f GB/s (best %6.1f)  d2h %6.1f GB/s (best %6.1f)\n",
        memory, out[memory]["h2d"]["median_gbps"].get<double>(),
        out[memory]["h2d"]["best_gbps"].get<double>(),
        out[memory]["d2h"]["median_gbps"].get<double>(),
        out[memory]["d2h"]["best_gbps"].get<double>());
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  munmap(shm, bytes);
  cudaFreeHost(pinned);
  cudaFree(gpu);
  return 0;
}
