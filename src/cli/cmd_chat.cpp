// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_chat(const Args&) { fail("'chat' is not implemented yet"); }

}  // namespace rl::cli
