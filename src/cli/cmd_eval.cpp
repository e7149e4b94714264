// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_eval(const Args&) { fail("'eval' is not implemented yet"); }

}  // namespace rl::cli
