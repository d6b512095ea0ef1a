// `gdaki env [--json]`: every GDAKI_* environment variable the library reads (the table in
// src/core/env_config.cpp), its value in effect, where that value came from (environment
// or default), what it accepts and what it means. A malformed value is named with what
// is accepted, and the exit status is 1, as the library itself would refuse it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "core/env_config.hpp"

namespace gdaki::tool {

namespace {

struct env_options {
  bool json = false;
};

int run_env(const env_options& o) {
  const std::vector<env::setting> rows = env::current();
  bool bad = false;
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const env::setting& s : rows) {
      j.push_back({{"name", s.var->name},
                   {"value", s.value},
                   {"source", s.source},
                   {"default", s.var->default_value},
                   {"accepts", env::accepted(*s.var)},
                   {"meaning", s.var->meaning},
                   {"error", s.error}});
      bad = bad || !s.error.empty();
    }
    std::printf("%s\n", nlohmann::json{{"variables", j}}.dump(2).c_str());
    return bad ? exit_failure : exit_ok;
  }
  std::printf("%-32s %-12s %-11s %s\n", "variable", "value", "source", "accepts: meaning");
  for (const env::setting& s : rows) {
    const std::string value = s.value.empty() ? "(unset)" : s.value;
    std::printf("%-32s %-12s %-11s %s: %s\n", s.var->name, value.c_str(), s.source.c_str(),
                env::accepted(*s.var).c_str(), s.var->meaning);
    if (!s.error.empty()) {
      std::printf("  error: %s\n", s.error.c_str());
      bad = true;
    }
  }
  return bad ? exit_failure : exit_ok;
}

}  // namespace

command_fn add_env(CLI::App& app) {
  auto o = std::make_shared<env_options>();
  CLI::App* sub = app.add_subcommand("env", "Print every GDAKI_* environment variable: value, source, accepted values");
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->footer("Exit status: 0, or 1 when a variable holds a value the library would refuse.");
  return [o] { return run_env(*o); };
}

}  // namespace gdaki::tool
