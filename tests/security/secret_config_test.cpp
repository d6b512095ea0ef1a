// Where the wire's secret comes from, and which secrets are refused before any connection
// (docs/soft-nic.md, Security): a key file group or others may read, one owned by another
// user, an all-zero or malformed secret, each with an error that names the file or
// variable and the cause; with nothing configured, a random secret per process.
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../../src/providers/soft/wire/wire_auth.hpp"
#include "gdaki/error.hpp"
#include "gdaki/providers/soft.hpp"
#include "gdaki/verbs/device.hpp"

namespace {

namespace wa = gdaki::soft::wire::auth;
using ::testing::HasSubstr;

const char* const good_hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::string temp_key(const std::string& content, mode_t mode) {
  char path[] = "/tmp/gdaki-key-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  (void)!::write(fd, content.data(), content.size());
  ::close(fd);
  ::chmod(path, mode);
  return path;
}

TEST(secret, key_file_readable_by_group_or_others_is_refused_naming_the_file_and_mode) {
  const std::string p = temp_key(good_hex, 0644);
  std::vector<uint8_t> s;
  std::string why;
  EXPECT_FALSE(wa::read_key_file(p, &s, &why));
  EXPECT_THAT(why, HasSubstr(p));
  EXPECT_THAT(why, HasSubstr("0644"));
  EXPECT_THAT(why, HasSubstr("chmod 600"));
  ::chmod(p.c_str(), 0640);
  EXPECT_FALSE(wa::read_key_file(p, &s, &why));
  ::chmod(p.c_str(), 0600);
  EXPECT_TRUE(wa::read_key_file(p, &s, &why)) << why;
  ASSERT_EQ(s.size(), 32u);
  EXPECT_EQ(s[1], 0x11);
  EXPECT_EQ(s[31], 0xff);
  ::unlink(p.c_str());
}

TEST(secret, key_file_owned_by_another_user_is_refused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string p = temp_key(good_hex, 0600);
  ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
  std::vector<uint8_t> s;
  std::string why;
  EXPECT_FALSE(wa::read_key_file(p, &s, &why));
  EXPECT_THAT(why, HasSubstr("owned by uid 65534"));
  ::unlink(p.c_str());
}

TEST(secret, zero_short_and_non_hex_secrets_are_refused_with_the_cause) {
  std::vector<uint8_t> s;
  std::string why;
  EXPECT_FALSE(wa::parse_secret_hex(std::string(64, '0'), "GDAKI_SOFT_SECRET", &s, &why));
  EXPECT_THAT(why, HasSubstr("GDAKI_SOFT_SECRET is all zero"));
  EXPECT_FALSE(wa::parse_secret_hex("abcd", "GDAKI_SOFT_SECRET", &s, &why));
  EXPECT_THAT(why, HasSubstr("32 to 128 hex digits"));
  EXPECT_FALSE(wa::parse_secret_hex(std::string(31, 'a') + "g", "GDAKI_SOFT_SECRET", &s, &why));
  EXPECT_THAT(why, HasSubstr("not hex"));
  EXPECT_FALSE(wa::parse_secret_hex("", "GDAKI_SOFT_SECRET", &s, &why));
  EXPECT_THAT(why, HasSubstr("empty"));
  EXPECT_TRUE(wa::parse_secret_hex(std::string("  ") + good_hex + "\n", "x", &s, &why)) << why;

  const std::vector<uint8_t> zero(32, 0);
  try {
    gdaki::soft::set_secret(zero.data(), zero.size());
    ADD_FAILURE() << "an all-zero secret was accepted";
  } catch (const gdaki::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("all zero"));
  }
  EXPECT_THROW(gdaki::soft::set_secret(zero.data(), 8), gdaki::error);
}

TEST(secret, the_environment_variable_wins_over_the_generated_one_and_bad_values_fail) {
  // Nothing configured: a random secret, the same for the whole process.
  ::unsetenv("GDAKI_SOFT_SECRET");
  std::vector<uint8_t> a, b;
  std::string why;
  ASSERT_TRUE(wa::current_secret(&a, &why)) << why;
  ASSERT_TRUE(wa::current_secret(&b, &why)) << why;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, std::vector<uint8_t>(32, 0));
  EXPECT_EQ(gdaki::soft::secret_hex().size(), 64u);
  // The variable.
  ::setenv("GDAKI_SOFT_SECRET", good_hex, 1);
  ASSERT_TRUE(wa::current_secret(&b, &why)) << why;
  EXPECT_EQ(gdaki::soft::secret_hex(), good_hex);
  ::setenv("GDAKI_SOFT_SECRET", std::string(64, '0').c_str(), 1);
  EXPECT_FALSE(wa::current_secret(&b, &why));
  EXPECT_THAT(why, HasSubstr("all zero"));
  try {
    (void)gdaki::soft::secret_hex();
    ADD_FAILURE() << "a zero GDAKI_SOFT_SECRET was accepted";
  } catch (const gdaki::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("GDAKI_SOFT_SECRET is all zero"));
  }
  ::unsetenv("GDAKI_SOFT_SECRET");
}

TEST(secret, a_wire_with_an_unusable_key_file_does_not_start_and_says_why) {
  ::unsetenv("GDAKI_SOFT_SECRET");
  const std::string p = temp_key(good_hex, 0644);
  gdaki::soft::config c = gdaki::soft::get_config();
  const gdaki::soft::config saved = c;
  c.secret_file = p;
  gdaki::soft::set_config(c);
  {
    gdaki::verbs::device d = gdaki::verbs::device::open("soft0");
    try {
      (void)gdaki::soft::local_address(d);
      ADD_FAILURE() << "the wire started with a key file others may read";
    } catch (const gdaki::error& e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot authenticate peers: key file " + p + " has mode 0644"));
    }
  }
  ::unlink(p.c_str());
  gdaki::soft::set_config(saved);
}

}  // namespace
