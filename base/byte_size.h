// byte_size.h: parsing and printing byte sizes as users write them on the
// command line: "4096", "64KiB", "256MiB", "2GiB", "1.5GB", "1TiB" (binary
// units are powers of 1024, decimal units powers of 1000; case-insensitive;
// "K", "M", "G", "T" alone are binary).
#ifndef STRATA_BASE_BYTE_SIZE_H_
#define STRATA_BASE_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// InvalidArgument for anything else (negative, empty, unknown unit, over
// 2^63 bytes), with the text and the accepted forms in the message.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// "256 MiB", "1.5 GiB", "4097 B": exact binary units when they divide.
std::string FormatByteSize(uint64_t bytes);
// FormatByteSize rounded up instead of to nearest, so that the text, parsed
// back as a flag value, is at least `bytes`: for "raise --x to at least N".
std::string FormatByteSizeAtLeast(uint64_t bytes);

// For "HAVE is below the NEED needed" (have < need): FormatByteSize(have)
// and FormatByteSizeAtLeast(need), or both in KiB (rounded down and up)
// when those would read as enough ("51 MiB" against "51.0 MiB").
struct ByteShortfall {
  std::string have, need;
};
ByteShortfall FormatByteShortfall(uint64_t have, uint64_t need);

// A flag type: --device-budget=256MiB.
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

}  // namespace strata

#endif  // STRATA_BASE_BYTE_SIZE_H_
