// json_nesting.h: how deeply a JSON text nests, found before a JSON library
// builds it. nlohmann::json parses any depth without recursion, but writes
// (dump), compares and converts recursively: a 200 KB file of '[' overflows
// the stack of the first dump (found by the fuzz targets' probe of deep
// inputs, tests/fuzz). Every reader of a user's JSON file checks the depth
// first.
#ifndef STRATA_BASE_JSON_NESTING_H_
#define STRATA_BASE_JSON_NESTING_H_

#include <string_view>

namespace strata {

// The deepest a file strata reads may nest arrays and objects (its own
// files nest 3 levels at most).
inline constexpr int kMaxJsonNesting = 64;

// The deepest nesting of arrays and objects in `text`, brackets inside
// strings (escapes included) not counted; `text` need not be valid JSON.
// Linear in the text, no allocation.
int JsonNestingDepth(std::string_view text);

}  // namespace strata

#endif  // STRATA_BASE_JSON_NESTING_H_
