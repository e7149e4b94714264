// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_detokenize(const Args&) { fail("'detokenize' is not implemented yet"); }

}  // namespace rl::cli
