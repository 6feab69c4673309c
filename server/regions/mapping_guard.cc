#include "server/regions/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace gemm::server {
namespace {

// One guarded mapping. `begin` is 0 while the slot is free; a slot is
// claimed by its `claimed` flag, then published by storing `end` and then
// `begin`.
struct Slot {
  std::atomic<bool> claimed{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Slot g_slots[MappingGuard::kMaxGuarded];
struct sigaction g_previous;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : g_slots) {
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin) continue;
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    // A slot freed and claimed again between the two loads would pair one
    // mapping's start with another's end: read the start again.
    if (slot.begin.load(std::memory_order_acquire) != begin) continue;
    if (address >= end) continue;
    // The object shrank under the mapping: private zero pages in its
    // place, so that the faulting access and every later one complete.
    void* replaced = mmap(reinterpret_cast<void*>(begin), end - begin,
                          PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (replaced != MAP_FAILED) {
      slot.faulted.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours: whoever handled SIGBUS before, or the default (the process
  // dies with the fault, as without a guard).
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(signal, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL &&
             g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
    return;
  }
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &fallback, nullptr);
  // Returning re-runs the access, which now faults to the default action.
}

void InstallHandlerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

}  // namespace

MappingGuard::MappingGuard(void* base, size_t length) {
  InstallHandlerOnce();
  for (int i = 0; i < kMaxGuarded; ++i) {
    bool expected = false;
    if (!g_slots[i].claimed.compare_exchange_strong(expected, true)) continue;
    Slot& slot = g_slots[i];
    slot.faulted.store(false, std::memory_order_relaxed);
    const auto begin = reinterpret_cast<uintptr_t>(base);
    slot.end.store(begin + length, std::memory_order_release);
    slot.begin.store(begin, std::memory_order_release);
    slot_ = i;
    return;
  }
}

MappingGuard::~MappingGuard() {
  if (slot_ < 0) return;
  Slot& slot = g_slots[slot_];
  // The start goes first: a handler that still sees it also sees the end.
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_release);
  slot.claimed.store(false, std::memory_order_release);
}

bool MappingGuard::faulted() const {
  return slot_ >= 0 && g_slots[slot_].faulted.load(std::memory_order_acquire);
}

}  // namespace gemm::server
