// `gdaki dump wqe|cqe HEX...`: decodes a send WQE or a 64-byte CQE given as hex bytes (on
// the command line, from a file or from stdin) into named fields, with the same decoder
// the tests and error dumps use (gdaki/prm/decode.hpp).
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/decode.hpp"

namespace gdaki::tool {
namespace {

struct dump_options {
  std::string kind;
  std::vector<std::string> hex;
  std::string file;
  bool raw = false;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Accepts what people paste: "00 01 05 08", "00010508", "0x00,0x01", "00:01", hex_dump()
// output lines. Separators are whitespace, commas and colons; "0x" prefixes are dropped.
// Returns false with *why naming the first bad token.
bool parse_hex(const std::string& text, std::vector<uint8_t>* out, std::string* why) {
  std::string token;
  const auto flush = [&]() -> bool {
    std::string t = token;
    token.clear();
    if (t.empty()) return true;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t = t.substr(2);
    if (t.size() % 2 != 0) {
      *why = "odd number of hex digits in '" + t + "' (write each byte as two digits)";
      return false;
    }
    for (size_t i = 0; i < t.size(); i += 2) {
      const int hi = hex_value(t[i]), lo = hex_value(t[i + 1]);
      if (hi < 0 || lo < 0) {
        *why = "not hex: '" + t + "'";
        return false;
      }
      out->push_back(static_cast<uint8_t>(hi << 4 | lo));
    }
    return true;
  };
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ':') {
      if (!flush()) return false;
    } else {
      token += c;
    }
  }
  return flush();
}

int run_dump(const dump_options& o) {
  std::string text;
  for (const std::string& h : o.hex) text += h + " ";
  if (!o.file.empty()) {
    if (o.file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      std::ifstream in(o.file);
      if (!in) {
        std::fprintf(stderr, "gdaki dump: cannot open '%s'\n", o.file.c_str());
        return exit_usage;
      }
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
  }
  std::vector<uint8_t> bytes;
  std::string why;
  if (!parse_hex(text, &bytes, &why)) {
    std::fprintf(stderr, "gdaki dump: %s\n", why.c_str());
    return exit_usage;
  }
  if (bytes.empty()) {
    std::fprintf(stderr, "gdaki dump: no bytes given (pass hex bytes, --file FILE or --file - for stdin)\n");
    return exit_usage;
  }
  if (o.kind == "cqe") {
    if (bytes.size() != sizeof(prm::cqe64)) {
      std::fprintf(stderr, "gdaki dump: a CQE is %zu bytes; got %zu\n", sizeof(prm::cqe64), bytes.size());
      return exit_usage;
    }
    std::printf("%s\n", prm::decode_cqe(bytes.data()).c_str());
  } else {
    // The decoder reads whole 16-byte segments; a WQE is a multiple of them.
    if (bytes.size() < 16 || bytes.size() % 16 != 0) {
      std::fprintf(stderr, "gdaki dump: a WQE is a whole number of 16-byte segments; got %zu bytes\n", bytes.size());
      return exit_usage;
    }
    std::printf("%s", prm::decode_wqe(bytes.data(), bytes.size()).c_str());
  }
  if (o.raw) std::printf("%s", prm::hex_dump(bytes.data(), bytes.size()).c_str());
  return exit_ok;
}

}  // namespace

command_fn add_dump(CLI::App& app) {
  auto o = std::make_shared<dump_options>();
  CLI::App* sub = app.add_subcommand("dump", "Decode an mlx5 send WQE or a 64-byte CQE given as hex bytes");
  sub->add_option("kind", o->kind, "What the bytes are: wqe or cqe")->required()->check(CLI::IsMember({"wqe", "cqe"}));
  sub->add_option("hex", o->hex, "Hex bytes, e.g. 00 01 05 08 00 0a bc 03 ... (separators: space , :)");
  sub->add_option("-f,--file", o->file, "Read the hex bytes from FILE ('-' = stdin)");
  sub->add_flag("--raw", o->raw, "Also print the bytes as a hex dump");
  sub->footer(
      "Example (the spec's RDMA WRITE):\n  gdaki dump wqe 00 01 05 08 00 0a bc 03 00 00 00 08 00 00 00 00 "
      "00 00 7f 00 12 34 56 00 11 22 33 44 00 00 00 00 00 00 10 00 55 66 77 88 00 00 7f 00 aa bb cc 00");
  return [o] { return run_dump(*o); };
}

}  // namespace gdaki::tool
