// Every GDAKI_* environment variable the library reads, in one table (name, default,
// accepted values, meaning), and the strict readers the call sites use: a malformed value
// is a gdaki::error naming the variable, its value and what is accepted, never a silent
// default. `gdaki env` prints the table with each value and where it came from;
// docs/tool.md (Configuration) is the same table in words.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gdaki::env {

enum class kind {
  count,    // an unsigned decimal integer within [min, max]
  boolean,  // 1/0, on/off, true/false, yes/no
  choice,   // one of `choices` (comma-separated)
  text,     // any string (an address, a path)
};

struct variable {
  const char* name;
  kind type;
  const char* default_value;  // as a user would write it ("" = none)
  uint64_t min = 0, max = 0;  // count: the accepted range
  const char* choices = "";   // choice: comma-separated accepted values
  const char* meaning = "";
  const char* read_in = "";   // the file whose code reads it (for the docs and `gdaki env`)
};

// The table, in the order `gdaki env` prints it.
std::span<const variable> table();

// The table's entry for `name`; throws gdaki::error (invalid) for a name not in it (a call
// site that reads a variable the table does not list is a bug).
const variable& find(const std::string& name);

// What a variable accepts, in words ("an integer 1..64", "one of auto, tcp, shm").
std::string accepted(const variable& v);

// Strict readers: the environment's value when set and non-empty, else `fallback`.
// Malformed or out of range: throws gdaki::error (invalid) with
// "GDAKI_X='value': expected <accepted>".
uint32_t read_u32(const char* name, uint32_t fallback);
bool read_bool(const char* name, bool fallback);
std::string read_choice(const char* name, const std::string& fallback);
std::string read_text(const char* name, const std::string& fallback);

// One row of `gdaki env`: the value in effect and where it came from.
struct setting {
  const variable* var;
  std::string value;   // the environment's value, or the default
  std::string source;  // "environment" or "default"
  std::string error;   // non-empty when the environment's value is malformed
};
std::vector<setting> current();

}  // namespace gdaki::env
