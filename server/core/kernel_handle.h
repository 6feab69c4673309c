// A job's kernel past admission: a handle to its entry in the table of the
// backend that resolved it (Executor::ResolveKernel), not a name to look up
// again. The backend runs a batch from the handle's index in its own table;
// metrics, logs and the wire read the handle's name.
//
// Thread-safety: a KernelTable is immutable after construction and outlives
// every handle to its entries (its executor owns it and outlives the jobs);
// handles are plain values.
//
//   KernelTable table({{"v6", Precision::kFp32, "warp tiling"}, ...});
//   KernelHandle kernel = table.Find("v6");      // at admission
//   int index = table.IndexOf(kernel);           // at execution: 0
//   kernel.name();                               // "v6"
#ifndef GEMM_SERVER_CORE_KERNEL_HANDLE_H_
#define GEMM_SERVER_CORE_KERNEL_HANDLE_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/precision.h"

namespace gemm::server {

// A kernel a job may name, and the arithmetic it computes in (Info's
// kernel_details).
struct KernelDescription {
  std::string name;
  Precision precision = Precision::kFp32;
  std::string description;
};

class KernelTable;

// A kernel's entry in its table.
struct KernelEntry {
  KernelDescription about;
  const KernelTable* table = nullptr;
  int index = -1;  // its place in `table`
};

// A kernel resolved for a job; default-constructed, no kernel (a job not
// resolved by a backend). Equal handles name the same entry of one table.
class KernelHandle {
 public:
  KernelHandle() = default;
  explicit KernelHandle(const KernelEntry* entry) : entry_(entry) {}

  bool valid() const { return entry_ != nullptr; }
  // "" for no kernel.
  absl::string_view name() const {
    return entry_ != nullptr ? absl::string_view(entry_->about.name) : "";
  }
  Precision precision() const {
    return entry_ != nullptr ? entry_->about.precision : Precision::kFp32;
  }
  const KernelEntry* entry() const { return entry_; }

  friend bool operator==(const KernelHandle& a, const KernelHandle& b) {
    return a.entry_ == b.entry_;
  }
  friend bool operator!=(const KernelHandle& a, const KernelHandle& b) {
    return !(a == b);
  }
  friend std::ostream& operator<<(std::ostream& os, const KernelHandle& k) {
    return os << (k.valid() ? k.name() : absl::string_view("(none)"));
  }

 private:
  const KernelEntry* entry_ = nullptr;
};

// A backend's kernels, in order, fixed at construction. Not copyable or
// movable: its entries point back at it.
class KernelTable {
 public:
  explicit KernelTable(std::vector<KernelDescription> kernels);
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  // The kernel called `name`; no kernel (!valid()) when there is none.
  KernelHandle Find(absl::string_view name) const;
  KernelHandle at(int index) const { return KernelHandle(&entries_[index]); }
  int size() const { return static_cast<int>(entries_.size()); }
  // `kernel`'s index here; -1 when it is not one of this table's.
  int IndexOf(const KernelHandle& kernel) const;
  std::vector<std::string> names() const;
  std::vector<KernelDescription> descriptions() const;

 private:
  std::vector<KernelEntry> entries_;  // never resized after construction
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_KERNEL_HANDLE_H_
