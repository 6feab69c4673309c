// The decoding half of proto/wire_codec.h: messages read from gRPC's
// slices, with the large `bytes` fields left where they are, accepting
// exactly what protobuf's parser accepts (wire_codec_fuzzer checks it).
#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/wire_codec.h"
#include "proto/wire_format.h"

namespace gemm::wire {
namespace {

// Reads bytes across a sequence of pieces.
class PieceCursor {
 public:
  explicit PieceCursor(const std::vector<absl::string_view>& parts)
      : parts_(parts) {
    SkipEmpty();
  }

  bool AtEnd() const { return index_ >= parts_.size(); }

  bool ReadByte(uint8_t* byte) {
    if (AtEnd()) return false;
    *byte = static_cast<uint8_t>(parts_[index_][offset_]);
    Advance(1);
    return true;
  }

  // A varint of at most `max_bytes` bytes; bits beyond 64 are dropped, as
  // protobuf drops them.
  bool ReadVarint(uint64_t* value, int max_bytes = 10) {
    *value = 0;
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      if (7 * i < 64) *value |= uint64_t{byte & 0x7fu} << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // longer than allowed
  }

  // A tag as protobuf reads one: at most 5 bytes, kept modulo 2^32.
  bool ReadTag(uint32_t* tag) {
    uint64_t value;
    if (!ReadVarint(&value, 5)) return false;
    *tag = static_cast<uint32_t>(value);
    return true;
  }

  // A length as protobuf reads one: at most 5 bytes, and no more than its
  // parser's limit (INT_MAX less its 16 bytes of slop).
  static constexpr uint64_t kMaxLength = 0x7fffffff - 16;
  bool ReadLength(uint64_t* size) {
    return ReadVarint(size, 5) && *size <= kMaxLength;
  }

  // Takes the next `size` bytes: appended to `raw` (a copy) when given,
  // else as pieces pointing into the input.
  bool Take(uint64_t size, std::string* raw,
            std::vector<absl::string_view>* pieces) {
    while (size > 0) {
      if (AtEnd()) return false;
      const absl::string_view part = parts_[index_];
      const size_t n = std::min<uint64_t>(size, part.size() - offset_);
      const char* p = part.data() + offset_;
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
    if (offset_ == parts_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (index_ < parts_.size() && parts_[index_].empty()) ++index_;
  }

  const std::vector<absl::string_view>& parts_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

// The path ("params.kernel") of the first string field in `bytes`, a
// serialized `type`, whose value is not valid UTF-8; empty when there is
// none, or when the bytes are malformed in another way (protobuf's parser
// then says no on its own). Checked before protobuf parses, so that the
// field is named and protobuf does not log a line for every such message.
std::string FindInvalidUtf8(const google::protobuf::Descriptor& type,
                            absl::string_view bytes, int depth = 0) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return "";
    const FieldDescriptor* field = type.FindFieldByNumber(tag >> 3);
    if ((tag & 7) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return "";
      continue;
    }
    uint32_t size = 0;
    std::string value;
    if (!in.ReadVarint32(&size) || !in.ReadString(&value, size)) return "";
    if (field == nullptr) continue;
    if (field->type() == FieldDescriptor::TYPE_STRING &&
        !google::protobuf::internal::IsStructurallyValidUTF8(value)) {
      return field->name();
    }
    if (field->type() == FieldDescriptor::TYPE_MESSAGE && depth < 8) {
      const std::string inner =
          FindInvalidUtf8(*field->message_type(), value, depth + 1);
      if (!inner.empty()) return absl::StrCat(field->name(), ".", inner);
    }
  }
}

absl::Status MergeWithPieces(const Pieces& input,
                             const std::vector<PieceField>& piece_fields,
                             google::protobuf::Message* header,
                             std::vector<Pieces>* pieces);

// Parses every occurrence of an embedded-message field into one message, as
// protobuf merges them; `pieces` as for DecodeWithPieces.
absl::Status MergeOccurrences(const Pieces& field,
                              const std::vector<PieceField>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces) {
  header->Clear();
  pieces->assign(piece_fields.size(), Pieces());
  for (const Pieces& occurrence : field.occurrences) {
    absl::Status s = MergeWithPieces(occurrence, piece_fields, header, pieces);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// A GemmRequest, whole (`input`) or as the occurrences of an embedded field
// (`embedded`): params into `header`, operands left in place.
absl::Status DecodeGemmRequestPieces(const Pieces& input, bool embedded,
                                     v1::GemmRequest* header, Pieces* a,
                                     Pieces* b, Pieces* c) {
  // GemmRequest: params 1, a 2, b 3, c 4.
  const std::vector<PieceField> fields = {{2}, {3}, {4}};
  std::vector<Pieces> operands;
  absl::Status s = embedded
                       ? MergeOccurrences(input, fields, header, &operands)
                       : DecodeWithPieces(input, fields, header, &operands);
  if (!s.ok()) return s;
  *a = std::move(operands[0]);
  *b = std::move(operands[1]);
  *c = std::move(operands[2]);
  return absl::OkStatus();
}

}  // namespace

void Pieces::CopyTo(char* dst) const {
  for (absl::string_view part : parts) {
    std::memcpy(dst, part.data(), part.size());
    dst += part.size();
  }
}

absl::Status ReadBuffer(const grpc::ByteBuffer& buffer,
                        std::vector<grpc::Slice>* slices, Pieces* bytes) {
  slices->clear();
  grpc::Status dumped = buffer.Dump(slices);
  if (!dumped.ok()) {
    return absl::InternalError(
        absl::StrCat("reading a message: ", dumped.error_message()));
  }
  bytes->parts.clear();
  bytes->size = 0;
  bytes->present = true;
  for (const grpc::Slice& slice : *slices) {
    bytes->parts.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                              slice.size());
    bytes->size += slice.size();
  }
  return absl::OkStatus();
}

absl::Status DecodeWithPieces(const Pieces& input,
                              const std::vector<PieceField>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces) {
  header->Clear();
  pieces->assign(piece_fields.size(), Pieces());
  return MergeWithPieces(input, piece_fields, header, pieces);
}

namespace {

// DecodeWithPieces into a message and pieces that may already hold earlier
// occurrences: fields found in `input` are merged in as protobuf merges.
absl::Status MergeWithPieces(const Pieces& input,
                             const std::vector<PieceField>& piece_fields,
                             google::protobuf::Message* header,
                             std::vector<Pieces>* pieces) {
  // Every other field is re-assembled (tag and value) into `rest` and
  // parsed by protobuf. As in protobuf, a repeated field keeps the last
  // value.
  std::string rest;
  PieceCursor cursor(input.parts);
  auto malformed = [header](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed ", header->GetDescriptor()->name(), ": ", what));
  };
  while (!cursor.AtEnd()) {
    uint32_t tag;
    if (!cursor.ReadTag(&tag)) return malformed("bad or truncated tag");
    const uint32_t field = tag >> 3;
    const uint32_t wire = tag & 7;
    if (field == 0) return malformed("field number 0");
    if (wire == kWireLengthDelimited) {
      auto it = std::find_if(
          piece_fields.begin(), piece_fields.end(),
          [field](const PieceField& f) { return f.number == field; });
      if (it != piece_fields.end()) {
        Pieces& p = (*pieces)[it - piece_fields.begin()];
        uint64_t size;
        if (!cursor.ReadLength(&size)) return malformed("bad length");
        Pieces occurrence;
        if (!cursor.Take(size, nullptr, &occurrence.parts)) {
          return malformed("a field runs past the end of the message");
        }
        occurrence.size = size;
        occurrence.present = true;
        if (it->is_message) {
          p.parts.insert(p.parts.end(), occurrence.parts.begin(),
                         occurrence.parts.end());
          p.size += size;
          p.present = true;
          p.occurrences.push_back(std::move(occurrence));
        } else {
          p = std::move(occurrence);
        }
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
        if (!cursor.ReadLength(&size)) return malformed("bad length");
        AppendVarint(size, &rest);
        if (!cursor.Take(size, &rest, nullptr)) {
          return malformed("a field runs past the end of the message");
        }
        break;
      }
      default:
        return malformed("groups (wire types 3 and 4) are not accepted");
    }
  }
  if (const std::string field = FindInvalidUtf8(*header->GetDescriptor(), rest);
      !field.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not valid UTF-8 (a string field)"));
  }
  if (!header->MergeFromString(rest)) return malformed("bad fields");
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeWithPieces(const grpc::ByteBuffer& buffer,
                              const std::vector<PieceField>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces,
                              std::vector<grpc::Slice>* slices) {
  Pieces all;
  absl::Status read = ReadBuffer(buffer, slices, &all);
  if (!read.ok()) return read;
  return DecodeWithPieces(all, piece_fields, header, pieces);
}

absl::Status DecodeMessage(const grpc::ByteBuffer& buffer,
                           google::protobuf::Message* message) {
  std::vector<Pieces> none;
  std::vector<grpc::Slice> slices;
  return DecodeWithPieces(buffer, {}, message, &none, &slices);
}

absl::Status DecodeStreamRequest(const grpc::ByteBuffer& buffer,
                                 DecodedRequest* out) {
  // StreamRequest: data 5, job 7 (GemmRequest: params 1, a 2, b 3, c 4).
  std::vector<Pieces> pieces;
  out->data = Pieces();
  out->has_job = false;
  out->job.Clear();
  out->job_a = out->job_b = out->job_c = Pieces();
  absl::Status s = DecodeWithPieces(buffer, {{5}, {7, /*is_message=*/true}},
                                    &out->header, &pieces, &out->slices);
  if (!s.ok()) return s;
  out->data = std::move(pieces[0]);
  if (!pieces[1].present) return absl::OkStatus();
  s = DecodeGemmRequestPieces(pieces[1], /*embedded=*/true, &out->job,
                              &out->job_a, &out->job_b, &out->job_c);
  out->has_job = s.ok();
  if (!s.ok() && !absl::StartsWith(s.message(), "malformed")) {
    return absl::InvalidArgumentError(absl::StrCat("job.", s.message()));
  }
  return s;
}

absl::Status DecodeGemmRequest(const grpc::ByteBuffer& buffer,
                               DecodedGemmRequest* out) {
  Pieces all;
  absl::Status s = ReadBuffer(buffer, &out->slices, &all);
  if (!s.ok()) return s;
  return DecodeGemmRequestPieces(all, /*embedded=*/false, &out->header, &out->a,
                                 &out->b, &out->c);
}

absl::Status DecodeStreamResponse(const grpc::ByteBuffer& buffer,
                                  DecodedResponse* out) {
  // StreamResponse: job_id 1, chunk 2 (ResultChunk: offset 1, data 2),
  // end 3 (JobEnd: code 1, message 2, timing 3, c 4).
  v1::StreamResponse top;
  std::vector<Pieces> pieces;
  absl::Status s =
      DecodeWithPieces(buffer, {{2, /*is_message=*/true}, {3, true}}, &top,
                       &pieces, &out->slices);
  if (!s.ok()) return s;
  out->job_id = top.job_id();
  // A oneof: the last of chunk and end on the wire wins, as in protobuf;
  // which one that was is not kept by the cursor, so both present is
  // refused.
  const bool chunk = pieces[0].present;
  const bool end = pieces[1].present;
  out->has_chunk = false;
  out->has_end = false;
  out->end.Clear();
  out->data = Pieces();
  if (chunk && end) {
    return absl::InvalidArgumentError(
        "malformed StreamResponse: both a chunk and an end");
  }
  std::vector<Pieces> inner;
  if (chunk) {
    v1::ResultChunk header;
    s = MergeOccurrences(pieces[0], {{2}}, &header, &inner);
    if (!s.ok()) return s;
    out->has_chunk = true;
    out->chunk_offset = header.offset();
    out->data = std::move(inner[0]);
  } else if (end) {
    s = MergeOccurrences(pieces[1], {{4}}, &out->end, &inner);
    if (!s.ok()) return s;
    out->has_end = true;
    out->data = std::move(inner[0]);
  }
  return absl::OkStatus();
}

absl::Status DecodeGemmResponse(const grpc::ByteBuffer& buffer,
                                DecodedGemmResponse* out) {
  // GemmResponse: c 1, timing 2.
  std::vector<Pieces> pieces;
  absl::Status s =
      DecodeWithPieces(buffer, {{1}}, &out->header, &pieces, &out->slices);
  if (!s.ok()) return s;
  out->c = std::move(pieces[0]);
  return absl::OkStatus();
}

}  // namespace gemm::wire
