// `gdaki`: the command-line tool. Parses the command line with CLI11 and runs the chosen
// subcommand; one file per subcommand (devices.cpp, doctor.cpp, dump.cpp, bench*.cpp, env.cpp).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "commands.hpp"
#include "gdaki/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gdaki: GPU-initiated networking over mlx5 WQEs. Inspect devices, check what this machine "
               "can run, decode WQEs/CQEs and benchmark the data path.",
               "gdaki"};
  app.set_version_flag("--version", std::string("gdaki ") + GDAKI_VERSION);
  app.require_subcommand(1, 1);
  app.fallthrough(false);

  // Each add_* registers one subcommand; the parsed one is found by name.
  const std::map<std::string, gdaki::tool::command_fn> commands = {
      {"devices", gdaki::tool::add_devices(app)},
      {"doctor", gdaki::tool::add_doctor(app)},
      {"dump", gdaki::tool::add_dump(app)},
      {"bench", gdaki::tool::add_bench(app)},
      {"env", gdaki::tool::add_env(app)},
  };

  // CLI11 would only say "A subcommand is required" for a misspelt one: name it.
  if (argc > 1 && argv[1][0] != '-' && commands.count(argv[1]) == 0) {
    std::fprintf(stderr, "gdaki: unknown subcommand '%s' (devices, doctor, dump, bench, env; see gdaki --help)\n", argv[1]);
    return gdaki::tool::exit_usage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    // CLI11 uses its own non-zero codes for the kinds of parse errors; one usage status
    // is easier for scripts to test.
    return rc == 0 ? 0 : gdaki::tool::exit_usage;
  }
  try {
    for (const CLI::App* sub : app.get_subcommands()) {
      const auto it = commands.find(sub->get_name());
      if (it != commands.end()) return it->second();
    }
  } catch (const gdaki::error& e) {
    std::fprintf(stderr, "gdaki: %s\n", e.what());
    return gdaki::tool::exit_failure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gdaki: %s\n", e.what());
    return gdaki::tool::exit_failure;
  }
  return gdaki::tool::exit_usage;
}
