#include "server/core/kernel_handle.h"

#include <utility>

namespace gemm::server {

KernelTable::KernelTable(std::vector<KernelDescription> kernels) {
  entries_.reserve(kernels.size());
  for (KernelDescription& about : kernels) {
    const int index = static_cast<int>(entries_.size());
    entries_.push_back(KernelEntry{std::move(about), this, index});
  }
}

KernelHandle KernelTable::Find(absl::string_view name) const {
  for (const KernelEntry& entry : entries_) {
    if (entry.about.name == name) return KernelHandle(&entry);
  }
  return KernelHandle();
}

int KernelTable::IndexOf(const KernelHandle& kernel) const {
  const KernelEntry* entry = kernel.entry();
  return entry != nullptr && entry->table == this ? entry->index : -1;
}

std::vector<std::string> KernelTable::names() const {
  std::vector<std::string> names;
  for (const KernelEntry& entry : entries_) names.push_back(entry.about.name);
  return names;
}

std::vector<KernelDescription> KernelTable::descriptions() const {
  std::vector<KernelDescription> all;
  for (const KernelEntry& entry : entries_) all.push_back(entry.about);
  return all;
}

}  // namespace gemm::server
