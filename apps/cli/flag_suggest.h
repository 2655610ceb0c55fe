// flag_suggest.h: the nearest valid name to a mistyped one ("did you mean
// --device-budget?"), by edit distance, as git and cargo suggest.
#ifndef STRATA_APPS_CLI_FLAG_SUGGEST_H_
#define STRATA_APPS_CLI_FLAG_SUGGEST_H_

#include <string>
#include <string_view>
#include <vector>

namespace strata {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two neighbours each cost 1 ("budgte" -> "budget" is 1).
int EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, or "" when none is near enough to be a
// typo (distance above a third of the name's length, at least 2 allowed).
// Ties go to the earlier candidate.
std::string NearestName(std::string_view name,
                        const std::vector<std::string>& candidates);

}  // namespace strata

#endif  // STRATA_APPS_CLI_FLAG_SUGGEST_H_
