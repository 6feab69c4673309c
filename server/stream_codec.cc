#include "server/stream_codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpc/slice.h"
#include "server/status_macros.h"

namespace gemm::server {
namespace {

// Field numbers and wire types of StreamRequest (proto/gemm.proto).
constexpr uint32_t kDataField = 5;
constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireFixed64 = 1;
constexpr uint32_t kWireLengthDelimited = 2;
constexpr uint32_t kWireFixed32 = 5;

// Reads bytes across a sequence of slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {
    SkipEmpty();
  }

  bool AtEnd() const { return index_ >= slices_.size(); }

  bool ReadByte(uint8_t* byte) {
    if (AtEnd()) return false;
    *byte = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }

  // Takes the next `size` bytes: appended to `raw` (a copy) when given,
  // else as pieces pointing into the slices.
  bool Take(uint64_t size, std::string* raw,
            std::vector<absl::string_view>* pieces) {
    while (size > 0) {
      if (AtEnd()) return false;
      const grpc::Slice& slice = slices_[index_];
      const size_t n = std::min<uint64_t>(size, slice.size() - offset_);
      const char* p = reinterpret_cast<const char*>(slice.begin()) + offset_;
      if (raw != nullptr) raw->append(p, n);
      if (pieces != nullptr) pieces->emplace_back(p, n);
      Advance(n);
      size -= n;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

}  // namespace

void Pieces::CopyTo(char* dst) const {
  for (absl::string_view part : parts) {
    std::memcpy(dst, part.data(), part.size());
    dst += part.size();
  }
}

absl::Status DecodeWithPieces(const grpc::ByteBuffer& buffer,
                              const std::vector<uint32_t>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces,
                              std::vector<grpc::Slice>* slices) {
  slices->clear();
  pieces->assign(piece_fields.size(), Pieces());
  grpc::Status dumped = buffer.Dump(slices);
  if (!dumped.ok()) {
    return absl::InternalError(
        absl::StrCat("reading the request: ", dumped.error_message()));
  }
  // Every other field is re-assembled (tag and value) into `rest` and
  // parsed by protobuf. As in protobuf, a repeated field keeps the last
  // value.
  std::string rest;
  SliceCursor cursor(*slices);
  auto malformed = [header](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed ", header->GetDescriptor()->name(), ": ", what));
  };
  while (!cursor.AtEnd()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return malformed("truncated tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    if (field == 0) return malformed("field number 0");
    if (wire == kWireLengthDelimited) {
      auto it = std::find(piece_fields.begin(), piece_fields.end(), field);
      if (it != piece_fields.end()) {
        Pieces& p = (*pieces)[it - piece_fields.begin()];
        uint64_t size;
        if (!cursor.ReadVarint(&size)) return malformed("truncated length");
        p.parts.clear();
        if (!cursor.Take(size, nullptr, &p.parts)) {
          return malformed("a field runs past the end of the message");
        }
        p.size = size;
        continue;
      }
    }
    AppendVarint(tag, &rest);
    switch (wire) {
      case kWireVarint: {
        uint64_t value;
        if (!cursor.ReadVarint(&value)) return malformed("truncated varint");
        AppendVarint(value, &rest);
        break;
      }
      case kWireFixed64:
        if (!cursor.Take(8, &rest, nullptr)) return malformed("truncated");
        break;
      case kWireFixed32:
        if (!cursor.Take(4, &rest, nullptr)) return malformed("truncated");
        break;
      case kWireLengthDelimited: {
        uint64_t size;
        if (!cursor.ReadVarint(&size)) return malformed("truncated length");
        AppendVarint(size, &rest);
        if (!cursor.Take(size, &rest, nullptr)) {
          return malformed("a field runs past the end of the message");
        }
        break;
      }
      default:
        return malformed("unsupported wire type");
    }
  }
  if (!header->ParseFromString(rest)) return malformed("bad fields");
  return absl::OkStatus();
}

absl::Status DecodeStreamRequest(const grpc::ByteBuffer& buffer,
                                 DecodedRequest* out) {
  std::vector<Pieces> pieces;
  absl::Status s = DecodeWithPieces(buffer, {kDataField}, &out->header,
                                    &pieces, &out->slices);
  if (!s.ok()) {
    out->data.clear();
    out->data_size = 0;
    return s;
  }
  out->data = std::move(pieces[0].parts);
  out->data_size = pieces[0].size;
  return absl::OkStatus();
}

absl::Status DecodeGemmRequest(const grpc::ByteBuffer& buffer,
                               DecodedGemmRequest* out) {
  // GemmRequest: params 1, a 2, b 3, c 4.
  std::vector<Pieces> pieces;
  RETURN_IF_ERROR(
      DecodeWithPieces(buffer, {2, 3, 4}, &out->header, &pieces, &out->slices));
  out->a = std::move(pieces[0]);
  out->b = std::move(pieces[1]);
  out->c = std::move(pieces[2]);
  return absl::OkStatus();
}

grpc::ByteBuffer EncodeGemmResponse(const char* data, size_t size,
                                    const v1::Timing& timing,
                                    std::shared_ptr<const void> owner) {
  std::string head;
  head.push_back(0x0a);  // GemmResponse.c, length-delimited
  AppendVarint(size, &head);
  std::string tail;
  const std::string timing_bytes = timing.SerializeAsString();
  tail.push_back(0x12);  // GemmResponse.timing, length-delimited
  AppendVarint(timing_bytes.size(), &tail);
  tail += timing_bytes;
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  grpc_slice body = grpc_slice_new_with_user_data(const_cast<char*>(data),
                                                  size, &ReleaseOwner, held);
  grpc::Slice slices[3] = {grpc::Slice(head),
                           grpc::Slice(body, grpc::Slice::STEAL_REF),
                           grpc::Slice(tail)};
  return grpc::ByteBuffer(slices, 3);
}

grpc::ByteBuffer EncodeResultChunk(uint64_t job_id, uint64_t offset,
                                   const char* data, size_t size,
                                   std::shared_ptr<const void> owner) {
  // ResultChunk: offset (field 1, varint), data (field 2, bytes).
  const size_t chunk_size =
      1 + VarintSize(offset) + 1 + VarintSize(size) + size;
  std::string head;
  head.push_back(0x08);  // StreamResponse.job_id, varint
  AppendVarint(job_id, &head);
  head.push_back(0x12);  // StreamResponse.chunk, length-delimited
  AppendVarint(chunk_size, &head);
  head.push_back(0x08);  // ResultChunk.offset, varint
  AppendVarint(offset, &head);
  head.push_back(0x12);  // ResultChunk.data, length-delimited
  AppendVarint(size, &head);
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  grpc_slice body = grpc_slice_new_with_user_data(
      const_cast<char*>(data), size, &ReleaseOwner, held);
  grpc::Slice slices[2] = {grpc::Slice(head),
                           grpc::Slice(body, grpc::Slice::STEAL_REF)};
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer EncodeMessage(const google::protobuf::Message& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace gemm::server
