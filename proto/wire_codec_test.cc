// The wire codec: decoding StreamRequests as protobuf would, whatever the
// slicing (tags, lengths, repeated and message fields, invalid UTF-8).
// wire_codec_test_encode.cc has the encoders and the response decoders;
// the shared helpers are in wire_codec_test_util.h.
#include "proto/wire_codec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "proto/wire_codec_test_util.h"

namespace gemm::wire::codec_test {
namespace {

TEST(WireCodecTest, DecodesEveryFieldWhateverTheSlicing) {
  const v1::StreamRequest req = Sample();
  const std::string wire = req.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, wire.size()}) {
    SCOPED_TRACE(piece);
    DecodedRequest decoded;
    ASSERT_TRUE(DecodeStreamRequest(Cut(wire, piece), &decoded).ok());
    EXPECT_EQ(decoded.data.size, req.data().size());
    EXPECT_EQ(Joined(decoded), req.data());
    v1::StreamRequest header = req;
    header.clear_data();
    EXPECT_EQ(decoded.header.SerializeAsString(), header.SerializeAsString());
  }
}

TEST(WireCodecTest, DataMayComeBeforeOtherFieldsAndTheLastOneWins) {
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

TEST(WireCodecTest, RejectsTruncatedMessages) {
  const std::string wire = Sample().SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{5}, wire.size() - 1}) {
    DecodedRequest decoded;
    absl::Status s = DecodeStreamRequest(Cut(wire.substr(0, cut), 7), &decoded);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
  }
}

// Tags, lengths and repeated message fields are read as protobuf reads them:
// the decoders accept a message exactly when protobuf's parser does
// (wire_codec_fuzzer checks this on random input).
TEST(WireCodecTest, RejectsATagLongerThanProtobufReads) {
  // data (field 5, length-delimited) behind a 6-byte tag whose value is
  // 2^39 + 0x2a: protobuf reads at most 5 bytes and rejects it; a 64-bit
  // read cut to 32 bits would take it for field 5 and keep the byte.
  const std::string wire("\xaa\x80\x80\x80\x80\x10\x01x", 8);
  v1::StreamRequest parsed;
  ASSERT_FALSE(parsed.ParseFromString(wire));
  DecodedRequest decoded;
  EXPECT_EQ(DecodeStreamRequest(Cut(wire, 3), &decoded).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WireCodecTest, FiveByteTagsWrapAsInProtobuf) {
  // 2^32 + 8 in five bytes: protobuf keeps it modulo 2^32, field 1.
  const std::string wire("\x88\x80\x80\x80\x10\x05", 6);
  v1::StreamRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  DecodedRequest decoded;
  ASSERT_TRUE(DecodeStreamRequest(Cut(wire, 2), &decoded).ok());
  EXPECT_EQ(decoded.header.job_id(), parsed.job_id());
}

TEST(WireCodecTest, RejectsLengthsProtobufRejects) {
  // data (field 5) with a 6-byte length, and with a length of 2^31.
  for (const std::string& wire :
       {std::string("\x2a\x81\x80\x80\x80\x80\x00x", 8),
        std::string("\x2a\x80\x80\x80\x80\x08x", 7)}) {
    v1::StreamRequest parsed;
    ASSERT_FALSE(parsed.ParseFromString(wire));
    DecodedRequest decoded;
    EXPECT_EQ(DecodeStreamRequest(Cut(wire, 4), &decoded).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(WireCodecTest, RepeatedJobFieldsMergeAsInProtobuf) {
  // Two `job` fields: protobuf merges them, so params from the first and a
  // from the second make one job.
  v1::StreamRequest first, second;
  first.set_job_id(4);
  first.mutable_job()->mutable_params()->set_m(2);
  second.mutable_job()->set_a(std::string(8, '\x01'));
  const std::string wire =
      first.SerializeAsString() + second.SerializeAsString();
  v1::StreamRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_TRUE(parsed.job().has_params());
  DecodedRequest decoded;
  ASSERT_TRUE(DecodeStreamRequest(Cut(wire, 5), &decoded).ok());
  ASSERT_TRUE(decoded.has_job);
  EXPECT_EQ(decoded.job.params().m(), 2u);
  EXPECT_EQ(Joined(decoded.job_a), parsed.job().a());
}

TEST(WireCodecTest, EachOccurrenceOfAMessageFieldMustParseOnItsOwn) {
  // Two `chunk` fields: the first ends inside a varint that the second
  // would complete. Protobuf parses each occurrence on its own and rejects
  // this; gluing the occurrences together would accept it.
  const std::string wire("\x12\x01\x08\x12\x01\x01", 6);
  v1::StreamResponse parsed;
  ASSERT_FALSE(parsed.ParseFromString(wire));
  DecodedResponse decoded;
  EXPECT_EQ(DecodeStreamResponse(Cut(wire, 2), &decoded).code(),
            absl::StatusCode::kInvalidArgument);
}

int protobuf_log_lines = 0;
void CountLogLine(google::protobuf::LogLevel, const char*, int,
                  const std::string&) {
  ++protobuf_log_lines;
}

// Issue 11, defect 8 and issue 12, item 5: an invalid UTF-8 kernel name was
// "malformed GemmRequest: bad fields" and one protobuf log line per message.
TEST(WireCodecTest, InvalidUtf8IsNamedAndNotLogged) {
  v1::StreamRequest header;
  header.set_job_id(3);
  header.mutable_params()->set_kernel("v5");
  std::string wire = header.SerializeAsString();
  wire.replace(wire.find("v5"), 2, "\xff\xfe");
  v1::StreamRequest whole;
  whole.set_job_id(4);
  whole.mutable_job()->mutable_params()->set_kernel("v5");
  std::string whole_wire = whole.SerializeAsString();
  whole_wire.replace(whole_wire.find("v5"), 2, "\xc3\x28");

  protobuf_log_lines = 0;
  google::protobuf::LogHandler* old =
      google::protobuf::SetLogHandler(&CountLogLine);
  DecodedRequest decoded;
  const absl::Status s = DecodeStreamRequest(Cut(wire, 3), &decoded);
  const absl::Status w = DecodeStreamRequest(Cut(whole_wire, 4), &decoded);
  DecodedGemmRequest unary;
  const absl::Status u = DecodeGemmRequest(
      Cut(whole_wire.substr(whole_wire.find('\x3a') + 2), 5), &unary);
  google::protobuf::SetLogHandler(old);

  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "params.kernel: not valid UTF-8"))
      << s;
  EXPECT_TRUE(absl::StartsWith(w.message(), "job.params.kernel: not valid"))
      << w;
  EXPECT_TRUE(absl::StartsWith(u.message(), "params.kernel: not valid")) << u;
  EXPECT_EQ(protobuf_log_lines, 0);
}

}  // namespace
}  // namespace gemm::wire::codec_test
