#include "proto/wire_codec.h"

#include <cstring>
#include <string>

#include "grpc/slice.h"
#include "proto/wire_format.h"

namespace gemm::wire {
namespace {

// Bytes shorter than this go into the message's shared header slice: a
// slice of their own costs more than they do.
constexpr uint64_t kCopyBelowBytes = 512;

void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

// The size of `operands` and `params` encoded as a GemmRequest.
uint64_t GemmRequestSize(uint64_t params_size, const Operands& operands) {
  uint64_t size = LengthDelimitedSize(1, params_size);
  if (!operands.a.empty()) size += LengthDelimitedSize(2, operands.a.size());
  if (!operands.b.empty()) size += LengthDelimitedSize(3, operands.b.size());
  if (!operands.c.empty()) size += LengthDelimitedSize(4, operands.c.size());
  return size;
}

void WriteGemmRequest(const v1::GemmParams& params, uint64_t params_size,
                      const Operands& operands, MessageWriter* out) {
  out->Tag(1, kWireLengthDelimited);
  out->Varint(params_size);
  out->AppendMessage(params);
  // Empty fields are left out, as protobuf does.
  if (!operands.a.empty()) {
    out->CopiedBytes(2, operands.a.data(), operands.a.size());
  }
  if (!operands.b.empty()) {
    out->CopiedBytes(3, operands.b.data(), operands.b.size());
  }
  if (!operands.c.empty()) {
    out->CopiedBytes(4, operands.c.data(), operands.c.size());
  }
}

}  // namespace

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

uint64_t LengthDelimitedSize(uint32_t field, uint64_t size) {
  return VarintSize(uint64_t{field} << 3 | kWireLengthDelimited) +
         VarintSize(size) + size;
}

// ---- MessageWriter ----

void MessageWriter::Tag(uint32_t field, uint32_t wire_type) {
  Varint(uint64_t{field} << 3 | wire_type);
}

void MessageWriter::Varint(uint64_t value) {
  const size_t before = pending_.size();
  AppendVarint(value, &pending_);
  size_ += pending_.size() - before;
}

void MessageWriter::Append(absl::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  size_ += bytes.size();
}

void MessageWriter::AppendMessage(const google::protobuf::Message& message) {
  const size_t before = pending_.size();
  message.AppendToString(&pending_);
  size_ += pending_.size() - before;
}

void MessageWriter::FlushPending() {
  if (pending_.empty()) return;
  slices_.emplace_back(pending_);
  pending_.clear();
}

void MessageWriter::AddBody(grpc::Slice slice, uint64_t size) {
  FlushPending();
  slices_.push_back(std::move(slice));
  size_ += size;
}

void MessageWriter::CopiedBytes(uint32_t field, const char* data,
                                uint64_t size) {
  Tag(field, kWireLengthDelimited);
  Varint(size);
  if (size < kCopyBelowBytes) {
    Append(absl::string_view(data, size));
    return;
  }
  AddBody(grpc::Slice(data, size), size);  // grpc_slice_from_copied_buffer
}

void MessageWriter::OwnedBytes(uint32_t field, const char* data, uint64_t size,
                               std::shared_ptr<const void> owner) {
  Tag(field, kWireLengthDelimited);
  Varint(size);
  if (size < kCopyBelowBytes) {
    Append(absl::string_view(data, size));
    return;
  }
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  grpc_slice body = grpc_slice_new_with_user_data(const_cast<char*>(data), size,
                                                  &ReleaseOwner, held);
  AddBody(grpc::Slice(body, grpc::Slice::STEAL_REF), size);
}

grpc::ByteBuffer MessageWriter::Finish() {
  FlushPending();
  grpc::ByteBuffer buffer(slices_.data(), slices_.size());
  slices_.clear();
  size_ = 0;
  return buffer;
}

// ---- Server side ----

grpc::ByteBuffer EncodeGemmResponse(const char* data, size_t size,
                                    const v1::Timing& timing,
                                    std::shared_ptr<const void> owner) {
  MessageWriter out;
  out.OwnedBytes(1, data, size, std::move(owner));  // GemmResponse.c
  out.Tag(2, kWireLengthDelimited);                 // GemmResponse.timing
  out.Varint(timing.ByteSizeLong());
  out.AppendMessage(timing);
  return out.Finish();
}

grpc::ByteBuffer EncodeResultChunk(uint64_t job_id, uint64_t offset,
                                   const char* data, size_t size,
                                   std::shared_ptr<const void> owner) {
  // ResultChunk: offset (field 1, varint), data (field 2, bytes).
  const uint64_t chunk_size =
      1 + VarintSize(offset) + LengthDelimitedSize(2, size);
  MessageWriter out;
  out.Tag(1, kWireVarint);  // StreamResponse.job_id
  out.Varint(job_id);
  out.Tag(2, kWireLengthDelimited);  // StreamResponse.chunk
  out.Varint(chunk_size);
  out.Tag(1, kWireVarint);  // ResultChunk.offset
  out.Varint(offset);
  out.OwnedBytes(2, data, size, std::move(owner));  // ResultChunk.data
  return out.Finish();
}

grpc::ByteBuffer EncodeMessage(const google::protobuf::Message& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

// ---- Client side ----

grpc::ByteBuffer EncodeStreamRequest(const v1::StreamRequest& header,
                                     absl::string_view data) {
  MessageWriter out;
  out.AppendMessage(header);
  // StreamRequest.data (field 5); fields may come in any order.
  if (!data.empty()) out.CopiedBytes(5, data.data(), data.size());
  return out.Finish();
}

grpc::ByteBuffer EncodeWholeJob(uint64_t job_id, const v1::GemmParams& params,
                                const Operands& operands) {
  const uint64_t params_size = params.ByteSizeLong();
  MessageWriter out;
  out.Tag(1, kWireVarint);  // StreamRequest.job_id
  out.Varint(job_id);
  out.Tag(7, kWireLengthDelimited);  // StreamRequest.job
  out.Varint(GemmRequestSize(params_size, operands));
  WriteGemmRequest(params, params_size, operands, &out);
  return out.Finish();
}

grpc::ByteBuffer EncodeGemmRequest(const v1::GemmParams& params,
                                   const Operands& operands) {
  MessageWriter out;
  WriteGemmRequest(params, params.ByteSizeLong(), operands, &out);
  return out.Finish();
}

}  // namespace gemm::wire
