// cli_reference.h: the command reference (docs/cli.md) as Markdown, made of
// the very pages `strata --help` and `strata <command> --help` print, so the
// document cannot say what the binary does not. `strata help --markdown`
// prints it; tests/apps/cli_test.cc fails while docs/cli.md differs.
#ifndef STRATA_APPS_CLI_CLI_REFERENCE_H_
#define STRATA_APPS_CLI_CLI_REFERENCE_H_

#include <string>

namespace strata {

// The overview page, then each command's page (Commands() order), each in a
// text block under its own heading. Call it from the strata binary: a page
// reads its flags' help and defaults from the flags that binary defines.
std::string CliReferenceMarkdown();

}  // namespace strata

#endif  // STRATA_APPS_CLI_CLI_REFERENCE_H_
