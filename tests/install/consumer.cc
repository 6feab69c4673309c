// A program outside the Bazel workspace that uses an installed
// libgemm_client (tests/install_test.sh builds it with pkg-config and with
// CMake): one GEMM of an odd shape on random operands, checked against a
// float64 product computed here.
//
//   consumer HOST:PORT
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "client/lib/gemm_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer HOST:PORT\n");
    return 2;
  }
  const uint32_t m = 129, n = 65, k = 33;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> magnitude(0.1f, 1.0f);
  auto fill = [&](std::vector<float>& x) {
    for (float& v : x) v = (rng() % 2 ? 1.0f : -1.0f) * magnitude(rng);
  };
  std::vector<float> a(m * k), b(k * n), c(m * n, NAN);
  fill(a);
  fill(b);
  gemm::client::GemmClient::Options options;
  options.target = argv[1];
  auto client = gemm::client::GemmClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  gemm::client::GemmArgs args;
  args.problem = {m, n, k};
  args.a = a.data();
  args.b = b.data();
  const auto timing = (*client)->Gemm(args, c.data());
  if (!timing.ok()) {
    std::fprintf(stderr, "%s\n", timing.status().ToString().c_str());
    return 1;
  }
  double err2 = 0, ref2 = 0;
  for (uint32_t i = 0; i < m; ++i) {
    for (uint32_t j = 0; j < n; ++j) {
      double want = 0;
      for (uint32_t p = 0; p < k; ++p)
        want += double(a[i * k + p]) * b[p * n + j];
      err2 += (c[i * n + j] - want) * (c[i * n + j] - want);
      ref2 += want * want;
    }
  }
  const double error = std::sqrt(err2 / ref2);
  std::printf("%ux%ux%u on %s (%s): relative error %.2e\n", m, n, k,
              timing->device().c_str(), timing->kernel().c_str(), error);
  return error <= 1e-5 ? 0 : 1;
}
