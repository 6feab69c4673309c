#include "server/cuda/dispatch_policy.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace gemm::server {
namespace {

constexpr char kMagic[] = "# gemm-server dispatch table v1";

double Log2(uint32_t x) { return std::log2(std::max<uint32_t>(1, x)); }

}  // namespace

std::vector<uint32_t> DispatchPolicy::DefaultGrid() {
  return {64, 128, 256, 512, 1024, 2048, 4096};
}

DispatchPolicy DispatchPolicy::Fixed(const std::string& kernel) {
  DispatchPolicy policy;
  policy.kernels_ = {kernel};
  policy.origin_ = "fixed";
  policy.Index();
  return policy;
}

absl::StatusOr<DispatchPolicy> DispatchPolicy::Calibrate(
    const std::string& device_name, const std::vector<std::string>& kernels,
    const std::vector<uint32_t>& grid, const Measure& measure) {
  if (kernels.empty() || grid.empty()) {
    return absl::InvalidArgumentError("calibration needs kernels and a grid");
  }
  DispatchPolicy policy;
  policy.device_name_ = device_name;
  policy.kernels_ = kernels;
  policy.origin_ = "calibrated";
  for (uint32_t m : grid) {
    for (uint32_t n : grid) {
      for (uint32_t k : grid) {
        Entry entry{m, n, k, {}};
        for (const std::string& kernel : kernels) {
          ASSIGN_OR_RETURN(double ms, measure(kernel, m, n, k));
          entry.ms.push_back(ms);
        }
        policy.entries_.push_back(std::move(entry));
      }
    }
  }
  policy.Index();
  return policy;
}

absl::Status DispatchPolicy::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat("dispatch cache: cannot write ", tmp));
    }
    out << kMagic << "\n";
    out << "device\t" << device_name_ << "\n";
    out << "kernels\t" << absl::StrJoin(kernels_, "\t") << "\n";
    out.precision(6);
    for (const Entry& e : entries_) {
      out << e.m << "\t" << e.n << "\t" << e.k;
      for (double ms : e.ms) out << "\t" << std::fixed << ms;
      out << "\n";
    }
    if (!out) {
      return absl::DataLossError(
          absl::StrCat("dispatch cache: write of ", tmp, " failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("dispatch cache: cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<DispatchPolicy> DispatchPolicy::Load(
    const std::string& path, const std::string& device_name,
    const std::vector<std::string>& kernels) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("dispatch cache ", path, ": ", why));
  };
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return bad("not a table");
  DispatchPolicy policy;
  policy.origin_ = absl::StrCat("loaded from ", path);
  if (!std::getline(in, line) || line.rfind("device\t", 0) != 0) {
    return bad("no device line");
  }
  policy.device_name_ = line.substr(7);
  if (policy.device_name_ != device_name) {
    return absl::FailedPreconditionError(
        absl::StrCat("dispatch cache ", path, " was measured on '",
                     policy.device_name_, "', not on '", device_name, "'"));
  }
  if (!std::getline(in, line) || line.rfind("kernels\t", 0) != 0) {
    return bad("no kernels line");
  }
  policy.kernels_ = absl::StrSplit(line.substr(8), '\t');
  if (policy.kernels_ != kernels) {
    return absl::FailedPreconditionError(
        absl::StrCat("dispatch cache ", path, " compares ",
                     absl::StrJoin(policy.kernels_, ","), ", not ",
                     absl::StrJoin(kernels, ",")));
  }
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    Entry e;
    if (!(fields >> e.m >> e.n >> e.k))
      return bad(absl::StrCat("line '", line, "'"));
    double ms;
    while (fields >> ms) e.ms.push_back(ms);
    if (e.ms.size() != policy.kernels_.size()) {
      return bad(absl::StrCat("line '", line, "' has the wrong field count"));
    }
    policy.entries_.push_back(std::move(e));
  }
  if (policy.entries_.empty()) return bad("no entries");
  policy.Index();
  return policy;
}

void DispatchPolicy::Index() {
  points_.clear();
  for (const Entry& e : entries_) {
    points_.push_back(Point{Log2(e.m), Log2(e.n), Log2(e.k)});
  }
  every_kernel_.assign(kernels_.size(), true);
  // The grid's axes, and every point of their product with a time > 0 for
  // each kernel; otherwise no interpolation.
  std::set<uint32_t> ms, ns, ks;
  for (const Entry& e : entries_) {
    ms.insert(e.m);
    ns.insert(e.n);
    ks.insert(e.k);
  }
  axis_m_.clear();
  axis_n_.clear();
  axis_k_.clear();
  log_ms_.clear();
  if (ms.size() * ns.size() * ks.size() != entries_.size()) return;
  auto index_of = [](const std::set<uint32_t>& axis, uint32_t v) {
    return static_cast<size_t>(std::distance(axis.begin(), axis.find(v)));
  };
  std::vector<std::vector<double>> log_ms(
      kernels_.size(), std::vector<double>(entries_.size(), std::nan("")));
  for (const Entry& e : entries_) {
    const size_t at =
        (index_of(ms, e.m) * ns.size() + index_of(ns, e.n)) * ks.size() +
        index_of(ks, e.k);
    for (size_t kernel = 0; kernel < kernels_.size(); ++kernel) {
      if (!(e.ms[kernel] > 0)) return;
      log_ms[kernel][at] = std::log(e.ms[kernel]);
    }
  }
  for (const auto& kernel_times : log_ms) {
    for (double v : kernel_times) {
      if (std::isnan(v)) return;  // a point measured twice, one missing
    }
  }
  for (uint32_t v : ms) axis_m_.push_back(Log2(v));
  for (uint32_t v : ns) axis_n_.push_back(Log2(v));
  for (uint32_t v : ks) axis_k_.push_back(Log2(v));
  log_ms_ = std::move(log_ms);
}

namespace {

// Where `x` falls on `axis` (ascending): the lower neighbour's index and
// the weight of the upper one, both clamped to the axis.
void Bracket(const std::vector<double>& axis, double x, size_t* lower,
             double* weight) {
  if (axis.size() == 1 || x <= axis.front()) {
    *lower = 0;
    *weight = 0;
    return;
  }
  if (x >= axis.back()) {
    *lower = axis.size() - 2;
    *weight = 1;
    return;
  }
  size_t i = 0;
  while (axis[i + 1] < x) ++i;
  *lower = i;
  *weight = (x - axis[i]) / (axis[i + 1] - axis[i]);
}

}  // namespace

bool DispatchPolicy::ChooseInterpolated(const GemmProblem& shape,
                                        const std::vector<bool>& allowed,
                                        size_t* kernel) const {
  if (log_ms_.empty()) return false;
  size_t i, j, l;
  double wi, wj, wl;
  Bracket(axis_m_, Log2(shape.m), &i, &wi);
  Bracket(axis_n_, Log2(shape.n), &j, &wj);
  Bracket(axis_k_, Log2(shape.k), &l, &wl);
  const size_t nn = axis_n_.size(), nk = axis_k_.size();
  double best = std::numeric_limits<double>::infinity();
  for (size_t kernel_index = 0; kernel_index < log_ms_.size(); ++kernel_index) {
    if (kernel_index >= allowed.size() || !allowed[kernel_index]) continue;
    const std::vector<double>& t = log_ms_[kernel_index];
    double estimate = 0;
    for (int di = 0; di < 2; ++di) {
      const size_t ii = std::min(i + di, axis_m_.size() - 1);
      const double w1 = di ? wi : 1 - wi;
      for (int dj = 0; dj < 2; ++dj) {
        const size_t jj = std::min(j + dj, nn - 1);
        const double w2 = w1 * (dj ? wj : 1 - wj);
        for (int dl = 0; dl < 2; ++dl) {
          const size_t ll = std::min(l + dl, nk - 1);
          const double w3 = w2 * (dl ? wl : 1 - wl);
          if (w3 != 0) estimate += w3 * t[(ii * nn + jj) * nk + ll];
        }
      }
    }
    if (estimate < best) {
      best = estimate;
      *kernel = kernel_index;
    }
  }
  return true;
}

std::string DispatchPolicy::Choose(const GemmProblem& shape) const {
  return Choose(shape, every_kernel_);
}

std::string DispatchPolicy::Choose(const GemmProblem& shape,
                                   const std::vector<bool>& allowed) const {
  const size_t usable = std::min(allowed.size(), kernels_.size());
  size_t first_allowed = usable;
  for (size_t i = 0; i < usable; ++i) {
    if (allowed[i]) {
      first_allowed = i;
      break;
    }
  }
  if (first_allowed == usable) return "";
  if (points_.empty()) return kernels_[first_allowed];
  if (size_t kernel = 0; ChooseInterpolated(shape, allowed, &kernel)) {
    return kernels_[kernel];
  }
  const double lm = Log2(shape.m), ln = Log2(shape.n), lk = Log2(shape.k);
  size_t nearest = 0;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < points_.size(); ++i) {
    const double dm = lm - points_[i].log_m;
    const double dn = ln - points_[i].log_n;
    const double dk = lk - points_[i].log_k;
    const double d = dm * dm + dn * dn + dk * dk;
    if (d < best) {
      best = d;
      nearest = i;
    }
  }
  // The nearest point's fastest allowed kernel.
  const std::vector<double>& ms = entries_[nearest].ms;
  size_t fastest = first_allowed;
  for (size_t i = first_allowed + 1; i < usable; ++i) {
    if (allowed[i] && ms[i] < ms[fastest]) fastest = i;
  }
  return kernels_[fastest];
}

}  // namespace gemm::server
