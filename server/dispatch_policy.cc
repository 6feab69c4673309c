#include "server/dispatch_policy.h"

#include <cmath>
#include <fstream>
#include <limits>
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
    Point p{Log2(e.m), Log2(e.n), Log2(e.k), 0};
    for (size_t i = 1; i < e.ms.size(); ++i) {
      if (e.ms[i] < e.ms[p.fastest]) p.fastest = i;
    }
    points_.push_back(p);
  }
}

std::string DispatchPolicy::Choose(const GemmProblem& shape) const {
  if (points_.empty()) return kernels_.empty() ? "" : kernels_.front();
  const double lm = Log2(shape.m), ln = Log2(shape.n), lk = Log2(shape.k);
  const Point* nearest = &points_.front();
  double best = std::numeric_limits<double>::infinity();
  for (const Point& p : points_) {
    const double dm = lm - p.log_m;
    const double dn = ln - p.log_n;
    const double dk = lk - p.log_k;
    const double d = dm * dm + dn * dn + dk * dk;
    if (d < best) {
      best = d;
      nearest = &p;
    }
  }
  return kernels_[nearest->fastest];
}

}  // namespace gemm::server
