#include "server/stream_codec.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// `bytes` cut into slices at the given sizes (the rest in a last slice).
grpc::ByteBuffer Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.substr(i, piece));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(const DecodedRequest& decoded) {
  std::string out;
  for (absl::string_view piece : decoded.data) {
    out.append(piece.data(), piece.size());
  }
  return out;
}

v1::StreamRequest Sample() {
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

TEST(StreamCodecTest, DecodesEveryFieldWhateverTheSlicing) {
  const v1::StreamRequest req = Sample();
  const std::string wire = req.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, wire.size()}) {
    SCOPED_TRACE(piece);
    DecodedRequest decoded;
    ASSERT_TRUE(DecodeStreamRequest(Cut(wire, piece), &decoded).ok());
    EXPECT_EQ(decoded.data_size, req.data().size());
    EXPECT_EQ(Joined(decoded), req.data());
    v1::StreamRequest header = req;
    header.clear_data();
    EXPECT_EQ(decoded.header.SerializeAsString(), header.SerializeAsString());
  }
}

TEST(StreamCodecTest, DataMayComeBeforeOtherFieldsAndTheLastOneWins) {
  // Field order is free in protobuf; a repeated scalar keeps the last value.
  v1::StreamRequest first, second;
  first.set_data("first");
  second.set_job_id(5);
  second.set_data("second");
  const std::string wire =
      first.SerializeAsString() + second.SerializeAsString();
  DecodedRequest decoded;
  ASSERT_TRUE(DecodeStreamRequest(Cut(wire, 2), &decoded).ok());
  EXPECT_EQ(Joined(decoded), "second");
  EXPECT_EQ(decoded.header.job_id(), 5u);
}

TEST(StreamCodecTest, RejectsTruncatedMessages) {
  const std::string wire = Sample().SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{5}, wire.size() - 1}) {
    DecodedRequest decoded;
    absl::Status s = DecodeStreamRequest(Cut(wire.substr(0, cut), 7), &decoded);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
  }
}

TEST(StreamCodecTest, EncodedChunkIsAStreamResponseAndKeepsItsOwnerAlive) {
  auto owner = std::make_shared<std::string>(5000, 'x');
  (*owner)[4999] = 'y';
  std::weak_ptr<std::string> watch = owner;
  std::string bytes;
  {
    grpc::ByteBuffer buffer = EncodeResultChunk(
        42, 1 << 20, owner->data() + 1000, 4000, owner);
    owner.reset();
    EXPECT_FALSE(watch.expired()) << "the buffer holds the memory";
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  EXPECT_TRUE(watch.expired()) << "released with the buffer";
  v1::StreamResponse response;
  ASSERT_TRUE(response.ParseFromString(bytes));
  EXPECT_EQ(response.job_id(), 42u);
  ASSERT_TRUE(response.has_chunk());
  EXPECT_EQ(response.chunk().offset(), uint64_t{1} << 20);
  ASSERT_EQ(response.chunk().data().size(), 4000u);
  EXPECT_EQ(response.chunk().data().back(), 'y');
}

TEST(StreamCodecTest, GemmRequestOperandsStayInTheSlices) {
  v1::GemmRequest req;
  req.mutable_params()->set_m(2);
  req.mutable_params()->set_n(3);
  req.mutable_params()->set_k(4);
  req.mutable_params()->set_beta(0.5f);
  req.set_a(std::string(32, 'a'));
  req.set_b(std::string(48, 'b'));
  req.set_c(std::string(24, 'c'));
  const std::string wire = req.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{5}, wire.size()}) {
    DecodedGemmRequest in;
    ASSERT_TRUE(DecodeGemmRequest(Cut(wire, piece), &in).ok());
    EXPECT_EQ(in.header.params().SerializeAsString(),
              req.params().SerializeAsString());
    EXPECT_TRUE(in.header.a().empty()) << "operands are not copied into the header";
    std::string a(in.a.size, '\0'), b(in.b.size, '\0'), c(in.c.size, '\0');
    in.a.CopyTo(a.data());
    in.b.CopyTo(b.data());
    in.c.CopyTo(c.data());
    EXPECT_EQ(a, req.a());
    EXPECT_EQ(b, req.b());
    EXPECT_EQ(c, req.c());
  }
}

TEST(StreamCodecTest, EncodedGemmResponseParses) {
  auto owner = std::make_shared<std::string>("0123456789abcdef");
  v1::Timing timing;
  timing.set_kernel("v5");
  timing.set_compute_ms(1.25);
  grpc::ByteBuffer buffer =
      EncodeGemmResponse(owner->data(), owner->size(), timing, owner);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  v1::GemmResponse response;
  ASSERT_TRUE(response.ParseFromString(bytes));
  EXPECT_EQ(response.c(), *owner);
  EXPECT_EQ(response.timing().kernel(), "v5");
  EXPECT_EQ(response.timing().compute_ms(), 1.25);
}

}  // namespace
}  // namespace gemm::server
