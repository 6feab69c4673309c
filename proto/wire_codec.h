// Wire encoding of gemm.v1 messages straight from and to gRPC's byte
// buffers, so that operand and result bytes are never copied through
// protobuf `bytes` fields. Both sides use it: the server's methods and the
// client's calls are raw (grpc::ByteBuffer) and go through these functions.
//
// Reading: a message is decoded into an ordinary protobuf message that holds
// every field except the large `bytes` ones, whose contents stay where gRPC
// received them (Pieces pointing into the slices, which the decoded value
// keeps alive). The reader copies those pieces once, to where they belong:
// the job's pinned storage on the server, the caller's c_out on the client.
//
// Writing: the server frames results around the job's own memory, held by
// reference until gRPC releases the slice (no copy). The client copies
// operands once, straight into the outgoing message's slice: borrowing the
// caller's memory instead would be safe only if a job ended after gRPC had
// released every slice of it, and gRPC may still hold (and send) a
// message's slices after reporting its write done, or after the call ended
// (docs/decisions/0011-zero-copy-client-requests.md).
//
// Thread-safety: stateless functions.
//
//   DecodedRequest in;
//   RETURN_IF_ERROR(DecodeStreamRequest(buffer, &in));
//   in.data.CopyTo(dst);
//   grpc::ByteBuffer out = EncodeResultChunk(id, offset, c, n, job);
#ifndef GEMM_PROTO_WIRE_CODEC_H_
#define GEMM_PROTO_WIRE_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.pb.h"

namespace gemm::wire {

// The bytes of one `bytes` field (or of a whole message), in order, pointing
// into memory owned elsewhere (received slices).
struct Pieces {
  std::vector<absl::string_view> parts;
  uint64_t size = 0;
  // Whether the field was on the wire at all (it may be empty).
  bool present = false;
  // For an embedded message (PieceField::is_message): each occurrence on the
  // wire, in order; `parts` and `size` cover them all.
  std::vector<Pieces> occurrences;

  // Copies the bytes to `dst` (which must hold `size` bytes).
  void CopyTo(char* dst) const;
};

// The slices of a received buffer, kept alive, and its bytes as pieces.
absl::Status ReadBuffer(const grpc::ByteBuffer& buffer,
                        std::vector<grpc::Slice>* slices, Pieces* bytes);

// A length-delimited field that DecodeWithPieces leaves in place.
struct PieceField {
  uint32_t number = 0;
  // An embedded message rather than `bytes`. Protobuf keeps the last
  // occurrence of a `bytes` field but merges repeated occurrences of a
  // message field (each one parsed on its own into the same message), so
  // every occurrence is kept (Pieces::occurrences).
  bool is_message = false;
};

// Decodes the message in `input` into `header`, except the length-delimited
// fields in `piece_fields`: their bytes are returned in `pieces` (indexed
// like `piece_fields`), pointing into `input`'s memory. Accepts exactly what
// protobuf's parser accepts, except groups (wire types 3 and 4, proto2
// only), which it refuses. INVALID_ARGUMENT when the bytes are not a
// well-formed message.
absl::Status DecodeWithPieces(const Pieces& input,
                              const std::vector<PieceField>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces);

// The same over a received buffer, whose slices land in `slices`.
absl::Status DecodeWithPieces(const grpc::ByteBuffer& buffer,
                              const std::vector<PieceField>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces,
                              std::vector<grpc::Slice>* slices);

// An outgoing message assembled from owned bytes (copied: tags, lengths,
// small fields) and bytes that are referenced, not copied.
class MessageWriter {
 public:
  // A field's tag (number and wire type).
  void Tag(uint32_t field, uint32_t wire_type);
  void Varint(uint64_t value);
  // Bytes copied into the message.
  void Append(absl::string_view bytes);
  // A serialized message's fields, appended (copied).
  void AppendMessage(const google::protobuf::Message& message);
  // A `bytes` field whose `size` bytes at `data` are copied into a slice of
  // their own (one copy, no protobuf in between).
  void CopiedBytes(uint32_t field, const char* data, uint64_t size);
  // A `bytes` field whose bytes are not copied; `owner` is held until gRPC
  // releases them.
  void OwnedBytes(uint32_t field, const char* data, uint64_t size,
                  std::shared_ptr<const void> owner);

  // Bytes written so far.
  uint64_t size() const { return size_; }
  grpc::ByteBuffer Finish();

 private:
  void FlushPending();
  void AddBody(grpc::Slice slice, uint64_t size);

  std::vector<grpc::Slice> slices_;
  std::string pending_;  // owned bytes not yet in a slice
  uint64_t size_ = 0;
};

// Stream messages up to this size may be held back by gRPC (a buffer hint)
// when both sides coalesce small writes; larger ones always go at once.
inline constexpr size_t kCoalesceMaxBytes = 256 << 10;

// Encoded size of a varint, and of a length-delimited field with a body of
// `size` bytes (tag and length included).
size_t VarintSize(uint64_t value);
uint64_t LengthDelimitedSize(uint32_t field, uint64_t size);

// ---- Server side: requests in, results out. ----

struct DecodedRequest {
  // Every field of the message except `data` and `job`.
  v1::StreamRequest header;
  // The bytes of `data`, pointing into `slices`.
  Pieces data;
  // A whole-job message (StreamRequest.job): its params, and its operands
  // left in the slices.
  bool has_job = false;
  v1::GemmRequest job;  // params only
  Pieces job_a, job_b, job_c;
  // Keeps the received bytes alive as long as `data` is used.
  std::vector<grpc::Slice> slices;
};

// INVALID_ARGUMENT when the bytes are not a well-formed StreamRequest.
absl::Status DecodeStreamRequest(const grpc::ByteBuffer& buffer,
                                 DecodedRequest* out);

// A GemmRequest decoded with its operands left in the received slices.
struct DecodedGemmRequest {
  v1::GemmRequest header;  // params only
  Pieces a, b, c;
  std::vector<grpc::Slice> slices;
};
absl::Status DecodeGemmRequest(const grpc::ByteBuffer& buffer,
                               DecodedGemmRequest* out);

// The most a message that carries result bytes adds to them, so that a
// result of N bytes is sure to fit in a message of N + this many: a
// ResultChunk's StreamResponse (job_id, offset, tags and lengths: 34 bytes
// at most), a GemmResponse, or a StreamResponse whose JobEnd carries the
// result inline (job_id, tags and lengths, and a Timing: six doubles, the
// batch size and the kernel's and device's names, about 90 bytes besides
// the names; a kernel's is a short registry name, a device's "cpu" or
// "cuda:N" and a CUDA device name of at most 255 bytes). Rounded up well
// beyond that.
inline constexpr uint64_t kResultMessageOverheadBytes = 1024;

// A StreamResponse{job_id, chunk{offset, data}} whose data are the `size`
// bytes at `data`, not copied: `owner` is held until gRPC releases them.
grpc::ByteBuffer EncodeResultChunk(uint64_t job_id, uint64_t offset,
                                   const char* data, size_t size,
                                   std::shared_ptr<const void> owner);

// A GemmResponse{c, timing} whose c are the `size` bytes at `data`, not
// copied: `owner` is held until gRPC releases them.
grpc::ByteBuffer EncodeGemmResponse(const char* data, size_t size,
                                    const v1::Timing& timing,
                                    std::shared_ptr<const void> owner);

// Any message, serialized the ordinary way (one copy; for small messages).
grpc::ByteBuffer EncodeMessage(const google::protobuf::Message& message);

// Any message, parsed the ordinary way (for small messages), with the
// checks of DecodeWithPieces: INVALID_ARGUMENT naming the message
// ("malformed InfoRequest: ...") or the field when the bytes are not one.
absl::Status DecodeMessage(const grpc::ByteBuffer& buffer,
                           google::protobuf::Message* message);

// ---- Client side: operands out, results in. ----

// A job's operand bytes (any may be empty).
struct Operands {
  absl::string_view a, b, c;
};

// A StreamRequest: `header`'s fields (its `data` and `job` must be unset)
// plus `data` as StreamRequest.data.
grpc::ByteBuffer EncodeStreamRequest(const v1::StreamRequest& header,
                                     absl::string_view data);

// A StreamRequest{job_id, job{params, a, b, c}}: a whole job in one
// message.
grpc::ByteBuffer EncodeWholeJob(uint64_t job_id, const v1::GemmParams& params,
                                const Operands& operands);

// A GemmRequest{params, a, b, c}.
grpc::ByteBuffer EncodeGemmRequest(const v1::GemmParams& params,
                                   const Operands& operands);

// A StreamResponse with its result bytes (ResultChunk.data or JobEnd.c) left
// in the received slices.
struct DecodedResponse {
  uint64_t job_id = 0;
  bool has_chunk = false;
  uint64_t chunk_offset = 0;
  bool has_end = false;
  v1::JobEnd end;  // without c
  // ResultChunk.data for a chunk, JobEnd.c for an end.
  Pieces data;
  std::vector<grpc::Slice> slices;
};
absl::Status DecodeStreamResponse(const grpc::ByteBuffer& buffer,
                                  DecodedResponse* out);

// A GemmResponse decoded with c left in the received slices.
struct DecodedGemmResponse {
  v1::GemmResponse header;  // timing only
  Pieces c;
  std::vector<grpc::Slice> slices;
};
absl::Status DecodeGemmResponse(const grpc::ByteBuffer& buffer,
                                DecodedGemmResponse* out);

}  // namespace gemm::wire

#endif  // GEMM_PROTO_WIRE_CODEC_H_
