// The subcommands of `redlite`. Each takes the arguments after its name and returns the exit
// status: 0 success, 1 error (one message on stderr), 2 usage error.
#pragma once
#include <string>
#include <vector>

namespace rl::cli {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);
int cmd_mkmodel(const Args& args);
int cmd_run(const Args& args);
int cmd_chat(const Args& args);
int cmd_eval(const Args& args);
int cmd_tokenize(const Args& args);
int cmd_detokenize(const Args& args);
int cmd_bench(const Args& args);
int cmd_selftest(const Args& args);

}  // namespace rl::cli
