// Wire encoding of GemmStream messages straight from and to gRPC's byte
// buffers, so that operand and result bytes are not copied through protobuf
// `bytes` fields.
//
// Reading: DecodeStreamRequest parses a StreamRequest from the received
// slices; every field but `data` goes into an ordinary message, while `data`
// stays where gRPC received it (pieces pointing into the slices, which the
// result keeps alive). The service copies those pieces once, into the job's
// (pinned) storage. Writing: EncodeResultChunk frames a ResultChunk around
// the job's own C memory, which gRPC then sends without a copy; the slice
// holds a reference that keeps the memory alive until gRPC is done with it.
//
// Thread-safety: stateless functions.
//
//   DecodedRequest in;
//   RETURN_IF_ERROR(DecodeStreamRequest(buffer, &in));
//   for (absl::string_view piece : in.data) memcpy(dst, piece.data(), ...);
//   grpc::ByteBuffer out = EncodeResultChunk(id, offset, c, n, job);
#ifndef GEMM_SERVER_STREAM_CODEC_H_
#define GEMM_SERVER_STREAM_CODEC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.pb.h"

namespace gemm::server {

// The bytes of one `bytes` field, in order, pointing into received slices.
struct Pieces {
  std::vector<absl::string_view> parts;
  uint64_t size = 0;

  // Copies the bytes to `dst` (which must hold `size` bytes).
  void CopyTo(char* dst) const;
};

// Decodes `buffer` into `header`, except the length-delimited fields whose
// numbers are in `piece_fields`: their bytes stay in the slices (kept alive
// in `slices`) and are returned in `pieces`, indexed like `piece_fields`.
// INVALID_ARGUMENT when the bytes are not a well-formed message.
absl::Status DecodeWithPieces(const grpc::ByteBuffer& buffer,
                              const std::vector<uint32_t>& piece_fields,
                              google::protobuf::Message* header,
                              std::vector<Pieces>* pieces,
                              std::vector<grpc::Slice>* slices);

struct DecodedRequest {
  // Every field of the message except `data`.
  v1::StreamRequest header;
  // The bytes of `data`, in order, pointing into `slices`.
  std::vector<absl::string_view> data;
  uint64_t data_size = 0;
  // Keeps the received bytes alive as long as `data` is used.
  std::vector<grpc::Slice> slices;
};

// INVALID_ARGUMENT when the bytes are not a well-formed StreamRequest.
absl::Status DecodeStreamRequest(const grpc::ByteBuffer& buffer,
                                 DecodedRequest* out);

// A StreamResponse{job_id, chunk{offset, data}} whose data are the `size`
// bytes at `data`, not copied: `owner` is held until gRPC releases them.
grpc::ByteBuffer EncodeResultChunk(uint64_t job_id, uint64_t offset,
                                   const char* data, size_t size,
                                   std::shared_ptr<const void> owner);

// A GemmRequest decoded with its operands left in the received slices.
struct DecodedGemmRequest {
  v1::GemmRequest header;  // params only
  Pieces a, b, c;
  std::vector<grpc::Slice> slices;
};
absl::Status DecodeGemmRequest(const grpc::ByteBuffer& buffer,
                               DecodedGemmRequest* out);

// A GemmResponse{c, timing} whose c are the `size` bytes at `data`, not
// copied: `owner` is held until gRPC releases them.
grpc::ByteBuffer EncodeGemmResponse(const char* data, size_t size,
                                    const v1::Timing& timing,
                                    std::shared_ptr<const void> owner);

// Any message, serialized the ordinary way (one copy; for small messages).
grpc::ByteBuffer EncodeMessage(const google::protobuf::Message& message);

}  // namespace gemm::server

#endif  // GEMM_SERVER_STREAM_CODEC_H_
