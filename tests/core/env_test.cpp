// env_int: the integer knobs' parser (decode_stack's ring knobs, ANVIL_SKINNY_RING_GRID, ANVIL_ATTN_DECODE_SPLITS).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/env.h"

using namespace anvil;

namespace {
constexpr const char* kVar = "ANVIL_TEST_ENV_INT";

// The error's text for value v, or "" when it parses.
std::string error_for(const char* v) {
  setenv(kVar, v, 1);
  try {
    env_int("test_op", kVar, 2, 10, 7);
  } catch (const Error& e) {
    unsetenv(kVar);
    return e.what();
  }
  unsetenv(kVar);
  return "";
}
}  // namespace

TEST(EnvInt, UnsetOrEmptyGivesTheDefault) {
  unsetenv(kVar);
  EXPECT_EQ(env_int("test_op", kVar, 2, 10, 7), 7);
  setenv(kVar, "", 1);
  EXPECT_EQ(env_int("test_op", kVar, 2, 10, 7), 7);
  unsetenv(kVar);
}

TEST(EnvInt, ReadsTheBounds) {
  setenv(kVar, "2", 1);
  EXPECT_EQ(env_int("test_op", kVar, 2, 10, 7), 2);
  setenv(kVar, "10", 1);
  EXPECT_EQ(env_int("test_op", kVar, 2, 10, 7), 10);
  unsetenv(kVar);
}

TEST(EnvInt, MalformedOrOutOfRangeIsAnErrorNamingTheVariableAndRange) {
  for (const char* bad : {"1", "11", "-3", "abc", "4x", "3.5"}) {
    const std::string msg = error_for(bad);
    EXPECT_NE(msg.find("test_op"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(std::string(kVar) + ": an integer in [2, 10]"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(std::string("got ") + bad), std::string::npos) << bad << ": " << msg;
  }
}
