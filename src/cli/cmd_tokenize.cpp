// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_tokenize(const Args&) { fail("'tokenize' is not implemented yet"); }

}  // namespace rl::cli
