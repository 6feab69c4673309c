// What the wire codec tests (wire_codec_test*.cc) share: byte buffers cut
// into slices, pieces and buffers flattened back to bytes, patterned bytes
// that show a misplaced byte, and a StreamRequest with every field set.
//
// Thread-safety: free functions.
//
//   DecodedRequest decoded;
//   ASSERT_TRUE(DecodeStreamRequest(Cut(Sample().SerializeAsString(), 7),
//                                   &decoded).ok());
#ifndef GEMM_PROTO_WIRE_CODEC_TEST_UTIL_H_
#define GEMM_PROTO_WIRE_CODEC_TEST_UTIL_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/wire_codec.h"

namespace gemm::wire::codec_test {

// `bytes` cut into slices at the given sizes (the rest in a last slice).
inline grpc::ByteBuffer Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.substr(i, piece));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

inline std::string Joined(const Pieces& pieces) {
  std::string out(pieces.size, '\0');
  pieces.CopyTo(out.data());
  return out;
}

inline std::string Joined(const DecodedRequest& decoded) {
  return Joined(decoded.data);
}

// The bytes of a buffer, and whether any of its slices starts at `at`.
inline std::string Flatten(const grpc::ByteBuffer& buffer,
                           const char* at = nullptr, bool* found = nullptr) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    const char* begin = reinterpret_cast<const char*>(s.begin());
    if (found != nullptr && begin == at) *found = true;
    bytes.append(begin, s.size());
  }
  return bytes;
}

// Distinct bytes, so that a misplaced byte shows.
inline std::string Pattern(size_t size, int seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[i] = static_cast<char>(i * 31 + seed * 17 + (i >> 8));
  }
  return out;
}

inline v1::StreamRequest Sample() {
  v1::StreamRequest req;
  req.set_job_id(300);
  req.mutable_params()->set_m(7);
  req.mutable_params()->set_n(9);
  req.mutable_params()->set_k(11);
  req.mutable_params()->set_alpha(1.5f);
  req.mutable_params()->set_kernel("v5");
  req.set_operand(v1::OPERAND_B);
  req.set_offset(123456789);
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  req.set_data(data);
  req.set_end_of_job(true);
  return req;
}

}  // namespace gemm::wire::codec_test

#endif  // GEMM_PROTO_WIRE_CODEC_TEST_UTIL_H_
