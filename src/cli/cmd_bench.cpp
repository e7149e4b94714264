// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_bench(const Args&) { fail("'bench' is not implemented yet"); }

}  // namespace rl::cli
