#include "server/cuda/shape_tuner.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// The fastest of `ms` (negative: failed) that `allowed` permits, or -1.
int Fastest(const std::vector<double>& ms, const std::vector<bool>& allowed) {
  int best = -1;
  for (size_t i = 0; i < ms.size() && i < allowed.size(); ++i) {
    if (!allowed[i] || ms[i] < 0) continue;
    if (best < 0 || ms[i] < ms[best]) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

ShapeTuner::Measure ShapeTuner::EachKernel(
    std::function<absl::StatusOr<double>(const std::string& kernel,
                                         const GemmProblem& shape)>
        time) {
  return [time = std::move(time)](const GemmProblem& shape,
                                  const std::vector<std::string>& kernels) {
    std::vector<double> ms;
    for (const std::string& kernel : kernels) {
      absl::StatusOr<double> t = time(kernel, shape);
      ms.push_back(t.ok() ? *t : -1.0);
    }
    return ms;
  };
}

ShapeTuner::ShapeTuner(std::vector<std::string> kernels, Measure measure,
                       Options options)
    : kernels_(std::move(kernels)),
      measure_(std::move(measure)),
      options_(options),
      thread_([this] { Run(); }) {}

ShapeTuner::~ShapeTuner() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::string ShapeTuner::Lookup(const GemmProblem& shape,
                               const std::vector<bool>& allowed) {
  const Key key{shape.m, shape.n, shape.k};
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = shapes_.find(key);
    if (it != shapes_.end()) {
      const int best = Fastest(it->second, allowed);
      return best < 0 ? std::string() : kernels_[best];
    }
    if (shapes_.size() >= options_.max_shapes) return "";
  }
  absl::MutexLock lock(&mu_);
  if (shapes_.size() < options_.max_shapes && !stop_ &&
      shapes_.emplace(key, std::vector<double>()).second) {
    queue_.push_back(key);
  }
  return "";
}

void ShapeTuner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ShapeTuner* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
        return t->stop_ || (t->queue_.empty() && !t->measuring_);
      },
      this));
}

std::vector<ShapeTuner::Tuned> ShapeTuner::tuned() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<Tuned> out;
  for (const auto& [key, ms] : shapes_) {
    if (ms.empty()) continue;
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), ms});
  }
  return out;
}

void ShapeTuner::Run() {
  for (;;) {
    Key key;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ShapeTuner* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
            return t->stop_ || !t->queue_.empty();
          },
          this));
      if (stop_) return;
      key = queue_.front();
      queue_.pop_front();
      measuring_ = true;
    }
    const GemmProblem shape{std::get<0>(key), std::get<1>(key),
                            std::get<2>(key)};
    std::vector<double> ms = measure_(shape, kernels_);
    ms.resize(kernels_.size(), -1.0);
    const int fastest = Fastest(ms, std::vector<bool>(ms.size(), true));
    spdlog::debug("shape tuner: {} fastest {}", shape.ToString(),
                  fastest < 0 ? std::string("none") : kernels_[fastest]);
    absl::MutexLock lock(&mu_);
    shapes_[key] = std::move(ms);
    measuring_ = false;
  }
}

}  // namespace gemm::server
