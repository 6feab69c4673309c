// Differential fuzz target of the wire decoders (wire_codec.h) against
// protobuf's own parser: every input is decoded both ways, as each of the
// four messages the decoders read, split over one to three slices the way
// gRPC may hand it over. Whatever the decoders accept, protobuf must accept
// with the same contents; whatever protobuf rejects, the decoders must
// reject. The decoders may refuse what protobuf accepts only for the two
// documented reasons (groups; a StreamResponse with both a chunk and an
// end). Any disagreement aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"

namespace gemm::wire {
namespace {

std::string Concat(const Pieces& pieces) {
  std::string out(pieces.size, '\0');
  pieces.CopyTo(out.data());
  return out;
}

// The input as gRPC may deliver it: whole, or cut at points the input's
// first byte picks.
grpc::ByteBuffer AsBuffer(const std::string& bytes, uint8_t cut) {
  std::vector<grpc::Slice> slices;
  const size_t n = bytes.size();
  size_t first = cut % 3 == 0 ? n : (n * (cut % 7)) / 7;
  size_t second = cut % 3 == 2 ? first + (n - first) / 2 : n;
  slices.emplace_back(bytes.data(), first);
  if (second > first) slices.emplace_back(bytes.data() + first, second - first);
  if (n > second) slices.emplace_back(bytes.data() + second, n - second);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

[[noreturn]] void Disagree(const char* message, const absl::Status& ours,
                           const std::string& bytes,
                           const std::string& detail = "") {
  std::fprintf(
      stderr, "%s: decoders disagree with protobuf (ours: %s), %zu bytes\n%s\n",
      message, ours.ToString().c_str(), bytes.size(), detail.c_str());
  std::abort();
}

bool RefusedOnPurpose(const absl::Status& status) {
  const absl::string_view m = status.message();
  return m.find("groups (wire types 3 and 4)") != absl::string_view::npos ||
         m.find("both a chunk and an end") != absl::string_view::npos;
}

// Unknown fields carry no meaning for the service, and the decoders do not
// keep those of nested messages, so both sides drop them before comparing.
template <typename Message>
void Compare(const char* name, const absl::Status& ours, Message rebuilt,
             const std::string& bytes) {
  Message theirs;
  const bool parsed = theirs.ParseFromString(bytes);
  if (ours.ok()) {
    if (!parsed) Disagree(name, ours, bytes, "protobuf rejects it");
    theirs.DiscardUnknownFields();
    rebuilt.DiscardUnknownFields();
    // NaN compares equal to NaN: a NaN alpha must come through as it is.
    google::protobuf::util::DefaultFieldComparator floats;
    floats.set_treat_nan_as_equal(true);
    google::protobuf::util::MessageDifferencer differencer;
    differencer.set_field_comparator(&floats);
    std::string differences;
    differencer.ReportDifferencesToString(&differences);
    if (!differencer.Compare(rebuilt, theirs)) {
      Disagree(name, ours, bytes, differences);
    }
  } else if (parsed && !RefusedOnPurpose(ours)) {
    Disagree(name, ours, bytes);
  }
}

v1::GemmRequest Rebuild(const v1::GemmRequest& header, const Pieces& a,
                        const Pieces& b, const Pieces& c) {
  v1::GemmRequest out = header;
  out.set_a(Concat(a));
  out.set_b(Concat(b));
  out.set_c(Concat(c));
  return out;
}

void CheckAll(const std::string& bytes, uint8_t cut) {
  {
    DecodedRequest in;
    const absl::Status s = DecodeStreamRequest(AsBuffer(bytes, cut), &in);
    v1::StreamRequest rebuilt = in.header;
    if (s.ok()) {
      rebuilt.set_data(Concat(in.data));
      if (in.has_job) {
        *rebuilt.mutable_job() = Rebuild(in.job, in.job_a, in.job_b, in.job_c);
      }
    }
    Compare("StreamRequest", s, rebuilt, bytes);
  }
  {
    DecodedGemmRequest in;
    const absl::Status s = DecodeGemmRequest(AsBuffer(bytes, cut), &in);
    Compare("GemmRequest", s, Rebuild(in.header, in.a, in.b, in.c), bytes);
  }
  {
    DecodedResponse in;
    const absl::Status s = DecodeStreamResponse(AsBuffer(bytes, cut), &in);
    v1::StreamResponse rebuilt;
    rebuilt.set_job_id(in.job_id);
    if (in.has_chunk) {
      rebuilt.mutable_chunk()->set_offset(in.chunk_offset);
      rebuilt.mutable_chunk()->set_data(Concat(in.data));
    }
    if (in.has_end) {
      *rebuilt.mutable_end() = in.end;
      rebuilt.mutable_end()->set_c(Concat(in.data));
    }
    Compare("StreamResponse", s, rebuilt, bytes);
  }
  {
    DecodedGemmResponse in;
    const absl::Status s = DecodeGemmResponse(AsBuffer(bytes, cut), &in);
    v1::GemmResponse rebuilt = in.header;
    rebuilt.set_c(Concat(in.c));
    Compare("GemmResponse", s, rebuilt, bytes);
  }
}

}  // namespace
}  // namespace gemm::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs a line for every invalid UTF-8 string it parses; at
  // millions of inputs that is the whole cost of the run.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  if (size == 0) {
    gemm::wire::CheckAll("", 0);
    return 0;
  }
  // The first byte picks the slicing; the rest is the message.
  gemm::wire::CheckAll(
      std::string(reinterpret_cast<const char*>(data) + 1, size - 1), data[0]);
  return 0;
}
