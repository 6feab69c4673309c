// The wire codec (the suite: wire_codec_test.cc): encoded chunks, requests,
// responses and whole jobs that parse and own or share their bytes as they
// should, and the decoders of responses.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/wire_codec.h"
#include "proto/wire_codec_test_util.h"

namespace gemm::wire::codec_test {
namespace {

TEST(WireCodecTest, EncodedChunkIsAStreamResponseAndKeepsItsOwnerAlive) {
  auto owner = std::make_shared<std::string>(5000, 'x');
  (*owner)[4999] = 'y';
  std::weak_ptr<std::string> watch = owner;
  std::string bytes;
  {
    grpc::ByteBuffer buffer =
        EncodeResultChunk(42, 1 << 20, owner->data() + 1000, 4000, owner);
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

TEST(WireCodecTest, GemmRequestOperandsStayInTheSlices) {
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
    EXPECT_TRUE(in.header.a().empty())
        << "operands are not copied into the header";
    std::string a(in.a.size, '\0'), b(in.b.size, '\0'), c(in.c.size, '\0');
    in.a.CopyTo(a.data());
    in.b.CopyTo(b.data());
    in.c.CopyTo(c.data());
    EXPECT_EQ(a, req.a());
    EXPECT_EQ(b, req.b());
    EXPECT_EQ(c, req.c());
  }
}

TEST(WireCodecTest, EncodedGemmResponseParses) {
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

TEST(WireCodecTest, ResultMessagesAddAtMostTheirOverhead) {
  // Every field at its largest: the longest names a server gives (a
  // registry kernel name; a CUDA device's label, its name at most 255
  // bytes), and varints at their longest.
  v1::Timing timing;
  timing.set_queue_ms(1e300);
  timing.set_h2d_ms(1e300);
  timing.set_compute_ms(1e300);
  timing.set_d2h_ms(1e300);
  timing.set_server_ms(1e300);
  timing.set_gflops(1e300);
  timing.set_batch_size(std::numeric_limits<uint32_t>::max());
  timing.set_kernel(std::string(64, 'k'));
  timing.set_device("cuda:2147483647 " + std::string(255, 'd'));
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (uint64_t size : {uint64_t{4}, uint64_t{1} << 20, uint64_t{1} << 22}) {
    SCOPED_TRACE(size);
    auto owner = std::make_shared<std::string>(size, 'c');
    EXPECT_LE(
        EncodeResultChunk(kMax, kMax, owner->data(), size, owner).Length(),
        size + kResultMessageOverheadBytes);
    EXPECT_LE(EncodeGemmResponse(owner->data(), size, timing, owner).Length(),
              size + kResultMessageOverheadBytes);
    v1::StreamResponse inline_end;  // as StreamOutbox sends it
    inline_end.set_job_id(kMax);
    *inline_end.mutable_end()->mutable_timing() = timing;
    inline_end.mutable_end()->set_c(*owner);
    EXPECT_LE(inline_end.ByteSizeLong(), size + kResultMessageOverheadBytes);
  }
}

TEST(WireCodecTest, StreamRequestOwnsACopyOfTheCallersData) {
  std::string data = Pattern(100000, 1);
  const std::string original = data;
  v1::StreamRequest header;
  header.set_job_id(77);
  header.set_operand(v1::OPERAND_A);
  header.set_offset(4096);
  header.set_end_of_job(true);
  const grpc::ByteBuffer buffer = EncodeStreamRequest(header, data);
  // gRPC may send a message after its write is reported done: the caller's
  // memory may change (or go) once Encode* has returned.
  std::fill(data.begin(), data.end(), 'x');
  bool borrowed = false;
  const std::string bytes = Flatten(buffer, data.data(), &borrowed);
  EXPECT_FALSE(borrowed);
  v1::StreamRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.job_id(), 77u);
  EXPECT_EQ(parsed.offset(), 4096u);
  EXPECT_TRUE(parsed.end_of_job());
  EXPECT_EQ(parsed.data(), original);
}

TEST(WireCodecTest, SmallDataIsCopiedAndStillParses) {
  const std::string data = Pattern(100, 2);
  v1::StreamRequest header;
  header.set_job_id(1);
  v1::StreamRequest parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(Flatten(EncodeStreamRequest(header, data))));
  EXPECT_EQ(parsed.data(), data);
}

TEST(WireCodecTest, WholeJobRoundTripsThroughTheServersDecoder) {
  const std::string a = Pattern(3 * 5 * 4, 3), b = Pattern(5 * 7 * 4, 4),
                    c = Pattern(3 * 7 * 4 * 100, 5);
  v1::GemmParams params;
  params.set_m(3);
  params.set_n(7);
  params.set_k(5);
  params.set_beta(0.25f);
  params.set_kernel("v3");
  params.set_inline_result_max_bytes(1 << 16);
  const grpc::ByteBuffer buffer = EncodeWholeJob(912, params, {a, b, c});
  // Protobuf reads what the writer produced...
  v1::StreamRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.job_id(), 912u);
  EXPECT_EQ(parsed.job().a(), a);
  EXPECT_EQ(parsed.job().b(), b);
  EXPECT_EQ(parsed.job().c(), c);
  EXPECT_EQ(parsed.job().params().SerializeAsString(),
            params.SerializeAsString());
  // ...and so does the server's decoder, cut anywhere.
  const std::string bytes = Flatten(buffer);
  for (size_t piece : {size_t{1}, size_t{13}, bytes.size()}) {
    SCOPED_TRACE(piece);
    DecodedRequest in;
    ASSERT_TRUE(DecodeStreamRequest(Cut(bytes, piece), &in).ok());
    EXPECT_TRUE(in.has_job);
    EXPECT_EQ(in.header.job_id(), 912u);
    EXPECT_FALSE(in.header.has_job()) << "operands are not parsed twice";
    EXPECT_EQ(in.job.params().SerializeAsString(), params.SerializeAsString());
    EXPECT_EQ(Joined(in.job_a), a);
    EXPECT_EQ(Joined(in.job_b), b);
    EXPECT_EQ(Joined(in.job_c), c);
    EXPECT_EQ(in.data.size, 0u);
  }
}

TEST(WireCodecTest, GemmRequestLeavesOutEmptyOperands) {
  const std::string a = Pattern(2048, 6), b = Pattern(4096, 7);
  v1::GemmParams params;
  params.set_m(16);
  params.set_n(32);
  params.set_k(32);
  v1::GemmRequest parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(Flatten(EncodeGemmRequest(params, {a, b, {}}))));
  EXPECT_EQ(parsed.a(), a);
  EXPECT_EQ(parsed.b(), b);
  EXPECT_TRUE(parsed.c().empty());
  EXPECT_EQ(parsed.params().m(), 16u);
}

TEST(WireCodecTest, DecodesResultChunksEndsAndEmptyEnds) {
  v1::StreamResponse chunk;
  chunk.set_job_id(5);
  chunk.mutable_chunk()->set_offset(1 << 22);
  chunk.mutable_chunk()->set_data(Pattern(70000, 8));
  v1::StreamResponse end;
  end.set_job_id(6);
  end.mutable_end()->set_code(8);
  end.mutable_end()->set_message("queue full");
  end.mutable_end()->mutable_timing()->set_kernel("cublas");
  end.mutable_end()->set_c(Pattern(300, 9));
  v1::StreamResponse empty_end;  // an OK end with nothing set
  empty_end.set_job_id(7);
  empty_end.mutable_end();
  for (size_t piece : {size_t{1}, size_t{9}, size_t{1 << 20}}) {
    SCOPED_TRACE(piece);
    DecodedResponse out;
    ASSERT_TRUE(
        DecodeStreamResponse(Cut(chunk.SerializeAsString(), piece), &out).ok());
    EXPECT_EQ(out.job_id, 5u);
    EXPECT_TRUE(out.has_chunk);
    EXPECT_FALSE(out.has_end);
    EXPECT_EQ(out.chunk_offset, uint64_t{1} << 22);
    EXPECT_EQ(Joined(out.data), chunk.chunk().data());

    ASSERT_TRUE(
        DecodeStreamResponse(Cut(end.SerializeAsString(), piece), &out).ok());
    EXPECT_EQ(out.job_id, 6u);
    EXPECT_FALSE(out.has_chunk);
    EXPECT_TRUE(out.has_end);
    EXPECT_EQ(out.end.code(), 8);
    EXPECT_EQ(out.end.message(), "queue full");
    EXPECT_EQ(out.end.timing().kernel(), "cublas");
    EXPECT_TRUE(out.end.c().empty());
    EXPECT_EQ(Joined(out.data), end.end().c());

    ASSERT_TRUE(
        DecodeStreamResponse(Cut(empty_end.SerializeAsString(), piece), &out)
            .ok());
    EXPECT_EQ(out.job_id, 7u);
    EXPECT_TRUE(out.has_end) << "an empty end is still an end";
    EXPECT_EQ(out.data.size, 0u);
  }
}

TEST(WireCodecTest, ResponseWithoutChunkOrEndHasNeither) {
  v1::StreamResponse bare;
  bare.set_job_id(3);
  DecodedResponse out;
  ASSERT_TRUE(
      DecodeStreamResponse(Cut(bare.SerializeAsString(), 4), &out).ok());
  EXPECT_FALSE(out.has_chunk);
  EXPECT_FALSE(out.has_end);
}

TEST(WireCodecTest, RejectsMalformedResponses) {
  v1::StreamResponse chunk;
  chunk.set_job_id(5);
  chunk.mutable_chunk()->set_data(Pattern(1000, 10));
  const std::string wire = chunk.SerializeAsString();
  DecodedResponse out;
  EXPECT_EQ(DecodeStreamResponse(Cut(wire.substr(0, wire.size() - 3), 7), &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WireCodecTest, GemmResponseDecodesWithCInTheSlices) {
  v1::GemmResponse response;
  response.set_c(Pattern(65536, 11));
  response.mutable_timing()->set_compute_ms(0.5);
  DecodedGemmResponse out;
  ASSERT_TRUE(
      DecodeGemmResponse(Cut(response.SerializeAsString(), 5000), &out).ok());
  EXPECT_EQ(Joined(out.c), response.c());
  EXPECT_TRUE(out.header.c().empty());
  EXPECT_EQ(out.header.timing().compute_ms(), 0.5);
}

}  // namespace
}  // namespace gemm::wire::codec_test
