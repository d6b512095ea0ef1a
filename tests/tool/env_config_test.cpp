// The GDAKI_* table (src/core/env_config.cpp) and its strict readers: every variable the
// code reads is in the table and every row is read somewhere; malformed values are errors
// naming the variable and the accepted values (before the table, "abc" silently meant the
// default, and these tests failed); the table's defaults are the ones soft::config uses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/env_config.hpp"
#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"

namespace {

namespace env = gdaki::env;

// Sets one variable for the scope of a test, restoring the previous state after.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::string old_;
};

// The message of the gdaki::error that f throws, or "" when it does not throw.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), gdaki::status::invalid);
    return e.what();
  }
  return "";
}

// Every "GDAKI_X" string literal (the whole literal is the name) in the library and tool sources.
std::set<std::string> names_in_sources() {
  const std::filesystem::path root = GDAKI_SOURCE_DIR;
  const std::regex literal("\"(GDAKI_[A-Z0-9_]+)\"");
  std::set<std::string> out;
  for (const char* dir : {"src", "tools", "include"}) {
    for (const auto& f : std::filesystem::recursive_directory_iterator(root / dir)) {
      const auto ext = f.path().extension();
      if (!f.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      if (f.path().filename() == "env_config.cpp") continue;
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (auto it = std::sregex_iterator(s.begin(), s.end(), literal); it != std::sregex_iterator(); ++it) {
        out.insert((*it)[1]);
      }
    }
  }
  return out;
}

TEST(env_config, every_variable_the_code_names_is_in_the_table_and_every_row_is_read) {
  const std::set<std::string> used = names_in_sources();
  ASSERT_FALSE(used.empty()) << "found no GDAKI_* names under " << GDAKI_SOURCE_DIR;
  std::set<std::string> listed;
  for (const env::variable& v : env::table()) listed.insert(v.name);
  for (const std::string& n : used) EXPECT_TRUE(listed.count(n)) << n << " is read but not in the table";
  for (const std::string& n : listed) EXPECT_TRUE(used.count(n)) << n << " is in the table but nothing reads it";
}

TEST(env_config, unset_and_empty_mean_the_default) {
  ::unsetenv("GDAKI_SOFT_SPIN_US");
  EXPECT_EQ(env::read_u32("GDAKI_SOFT_SPIN_US", 77), 77u);
  scoped_env e("GDAKI_SOFT_SPIN_US", "");
  EXPECT_EQ(env::read_u32("GDAKI_SOFT_SPIN_US", 77), 77u);
}

TEST(env_config, well_formed_values_are_read) {
  {
    scoped_env e("GDAKI_SOFT_SPIN_US", "123");
    EXPECT_EQ(env::read_u32("GDAKI_SOFT_SPIN_US", 0), 123u);
  }
  {
    scoped_env e("GDAKI_SOFT_SHM_MAP", "off");
    EXPECT_FALSE(env::read_bool("GDAKI_SOFT_SHM_MAP", true));
  }
  {
    scoped_env e("GDAKI_SOFT_WIRE", "tcp");
    EXPECT_EQ(env::read_choice("GDAKI_SOFT_WIRE", "auto"), "tcp");
  }
}

TEST(env_config, malformed_values_are_errors_naming_the_variable_and_what_it_accepts) {
  {
    scoped_env e("GDAKI_SOFT_SPIN_US", "abc");
    EXPECT_EQ(error_of([] { env::read_u32("GDAKI_SOFT_SPIN_US", 50); }),
              "GDAKI_SOFT_SPIN_US='abc': expected an integer 0..4294967295");
  }
  {
    scoped_env e("GDAKI_SOFT_SPIN_US", "12us");
    EXPECT_NE(error_of([] { env::read_u32("GDAKI_SOFT_SPIN_US", 50); }).find("'12us'"), std::string::npos);
  }
  {
    scoped_env e("GDAKI_SOFT_SPIN_US", "99999999999");  // wider than 32 bits
    EXPECT_NE(error_of([] { env::read_u32("GDAKI_SOFT_SPIN_US", 50); }), "");
  }
  {
    scoped_env e("GDAKI_SOFT_DEVICES", "0");
    EXPECT_EQ(error_of([] { env::read_u32("GDAKI_SOFT_DEVICES", 1); }),
              "GDAKI_SOFT_DEVICES='0': expected an integer 1..256");
  }
  {
    scoped_env e("GDAKI_SOFT_SHM_MAP", "maybe");
    EXPECT_EQ(error_of([] { env::read_bool("GDAKI_SOFT_SHM_MAP", true); }),
              "GDAKI_SOFT_SHM_MAP='maybe': expected 1/0, on/off, true/false or yes/no");
  }
  {
    scoped_env e("GDAKI_SOFT_WIRE", "udp");
    EXPECT_EQ(error_of([] { env::read_choice("GDAKI_SOFT_WIRE", "auto"); }),
              "GDAKI_SOFT_WIRE='udp': expected one of auto, tcp, shm");
  }
}

TEST(env_config, the_soft_provider_refuses_a_malformed_value) {
  scoped_env e("GDAKI_SOFT_WIRE_WINDOW", "-1");
  EXPECT_EQ(error_of([] { gdaki::soft::config_from_env(); }),
            "GDAKI_SOFT_WIRE_WINDOW='-1': expected an integer 1..4294967295");
}

TEST(env_config, the_tables_defaults_are_the_soft_providers_defaults) {
  // Set every soft variable to the table's default text: the result must equal config{}.
  std::vector<std::unique_ptr<scoped_env>> set;
  for (const env::variable& v : env::table()) {
    if (std::string(v.name).rfind("GDAKI_SOFT_", 0) == 0) set.push_back(std::make_unique<scoped_env>(v.name, v.default_value));
  }
  ASSERT_GT(set.size(), 10u);
  const gdaki::soft::config want{}, got = gdaki::soft::config_from_env();
  EXPECT_EQ(got.devices, want.devices);
  EXPECT_EQ(got.engine_threads, want.engine_threads);
  EXPECT_EQ(got.inline_exec, want.inline_exec);
  EXPECT_EQ(got.spin_us, want.spin_us);
  EXPECT_EQ(got.yield_us, want.yield_us);
  EXPECT_EQ(got.min_sleep_us, want.min_sleep_us);
  EXPECT_EQ(got.max_sleep_us, want.max_sleep_us);
  EXPECT_EQ(got.budget, want.budget);
  EXPECT_EQ(got.timeout_cap_us, want.timeout_cap_us);
  EXPECT_EQ(got.wire, want.wire);
  EXPECT_EQ(got.listen_addr, want.listen_addr);
  EXPECT_EQ(got.listen_port, want.listen_port);
  EXPECT_EQ(got.wire_timeout_ms, want.wire_timeout_ms);
  EXPECT_EQ(got.shm_single_copy_min, want.shm_single_copy_min);
  EXPECT_EQ(got.wire_window, want.wire_window);
  EXPECT_EQ(got.wire_window_bytes, want.wire_window_bytes);
  EXPECT_EQ(got.shm_map, want.shm_map);
}

TEST(env_config, current_says_where_each_value_came_from) {
  ::unsetenv("GDAKI_SOFT_BUDGET");
  scoped_env e("GDAKI_SOFT_SPIN_US", "9");
  scoped_env bad("GDAKI_SOFT_WIRE", "udp");
  size_t seen = 0;
  for (const env::setting& s : env::current()) {
    const std::string name = s.var->name;
    if (name == "GDAKI_SOFT_SPIN_US") {
      EXPECT_EQ(s.value, "9");
      EXPECT_EQ(s.source, "environment");
      EXPECT_EQ(s.error, "");
      ++seen;
    } else if (name == "GDAKI_SOFT_BUDGET") {
      EXPECT_EQ(s.value, "64");
      EXPECT_EQ(s.source, "default");
      ++seen;
    } else if (name == "GDAKI_SOFT_WIRE") {
      EXPECT_EQ(s.error, "GDAKI_SOFT_WIRE='udp': expected one of auto, tcp, shm");
      ++seen;
    }
  }
  EXPECT_EQ(seen, 3u);
}

}  // namespace
