// Wire-format details shared by the encoders (wire_codec.cc) and the
// decoders (wire_decode.cc) of proto/wire_codec.h. Internal to //proto.
//
// Thread-safety: stateless.
//
//   std::string bytes;
//   AppendVarint(uint64_t{field} << 3 | kWireLengthDelimited, &bytes);
#ifndef GEMM_PROTO_WIRE_FORMAT_H_
#define GEMM_PROTO_WIRE_FORMAT_H_

#include <cstdint>
#include <string>

namespace gemm::wire {

inline constexpr uint32_t kWireVarint = 0;
inline constexpr uint32_t kWireFixed64 = 1;
inline constexpr uint32_t kWireLengthDelimited = 2;
inline constexpr uint32_t kWireFixed32 = 5;

inline void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

}  // namespace gemm::wire

#endif  // GEMM_PROTO_WIRE_FORMAT_H_
