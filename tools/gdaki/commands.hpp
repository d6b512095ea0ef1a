// The subcommands of `gdaki`. Each add_* registers its subcommand (options, --help text)
// on the application and returns the function main() runs when it was chosen; that
// function returns the process exit status.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace gdaki::tool {

using command_fn = std::function<int()>;

command_fn add_devices(CLI::App& app);
command_fn add_doctor(CLI::App& app);
command_fn add_dump(CLI::App& app);
command_fn add_bench(CLI::App& app);
command_fn add_env(CLI::App& app);

// Exit statuses shared by the subcommands.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;  // the run failed, or (doctor) the mode cannot run
inline constexpr int exit_usage = 2;    // bad arguments

}  // namespace gdaki::tool
