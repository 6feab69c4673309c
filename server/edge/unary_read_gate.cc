#include "server/edge/unary_read_gate.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gemm::server {

namespace {

UnaryReadGate::Options AtLeastOneRead(UnaryReadGate::Options options) {
  options.max_reads_per_client =
      std::max<size_t>(options.max_reads_per_client, 1);
  return options;
}

}  // namespace

UnaryReadGate::UnaryReadGate(const Options& options)
    : options_(AtLeastOneRead(options)) {}

absl::Status UnaryReadGate::Enter(const std::string& client, Waiter* waiter) {
  {
    absl::MutexLock lock(&mu_);
    if (!refusal_.ok()) return refusal_;
    Client& c = clients_[client];
    if (c.reading >= options_.max_reads_per_client) {
      if (options_.max_waiting_per_client > 0 &&
          c.waiting.size() >= options_.max_waiting_per_client) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "client ", client, " already has ", c.waiting.size(),
            " unary calls waiting for their requests to be read (", c.reading,
            " being read; gemm-server --max-client-jobs ",
            options_.max_waiting_per_client,
            "); wait for answers before sending more"));
      }
      c.waiting.push_back(waiter);
      ++waiting_;
      return absl::OkStatus();
    }
    ++c.reading;
    ++reading_;
  }
  waiter->StartReading();
  return absl::OkStatus();
}

void UnaryReadGate::Leave(const std::string& client) {
  Waiter* next = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = clients_.find(client);
    if (it == clients_.end() || it->second.reading == 0) return;
    Client& c = it->second;
    if (!c.waiting.empty()) {
      // The turn passes on: reading stays as it is.
      next = c.waiting.front();
      c.waiting.pop_front();
      --waiting_;
    } else {
      --c.reading;
      --reading_;
      if (c.reading == 0) clients_.erase(it);
    }
  }
  if (next != nullptr) next->StartReading();
}

bool UnaryReadGate::Withdraw(const std::string& client, Waiter* waiter) {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return false;
  std::deque<Waiter*>& waiting = it->second.waiting;
  auto w = std::find(waiting.begin(), waiting.end(), waiter);
  if (w == waiting.end()) return false;
  waiting.erase(w);
  --waiting_;
  return true;
}

void UnaryReadGate::RefuseAll(const absl::Status& status) {
  std::vector<Waiter*> refused;
  {
    absl::MutexLock lock(&mu_);
    refusal_ = status;
    for (auto& [client, c] : clients_) {
      refused.insert(refused.end(), c.waiting.begin(), c.waiting.end());
      waiting_ -= c.waiting.size();
      c.waiting.clear();
    }
  }
  for (Waiter* waiter : refused) waiter->Refuse(status);
}

size_t UnaryReadGate::reading() const {
  absl::MutexLock lock(&mu_);
  return reading_;
}

size_t UnaryReadGate::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace gemm::server
