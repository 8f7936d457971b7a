// ANVIL_BLASLT_TUNE's values (backends/gpu/vendor/blaslt_tune.h): read only where cuBLASLt runs a product, so its
// parsing is checked here, on the CPU. A value it does not know must be an error that names the variable and the
// value, never a silent default.
#include <gtest/gtest.h>

#include <string>

#include "backends/gpu/vendor/blaslt_tune.h"

namespace anvil::gpu {
namespace {

TEST(BlasltTune, KnownValues) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    const BlasltTune k = parse_blaslt_tune(unset);
    EXPECT_TRUE(k.skinny_only);
    EXPECT_FALSE(k.all);
    EXPECT_FALSE(k.log);
  }
  const BlasltTune off = parse_blaslt_tune("0");
  EXPECT_FALSE(off.skinny_only || off.all || off.log);
  const BlasltTune all = parse_blaslt_tune("all");
  EXPECT_TRUE(all.all);
  EXPECT_FALSE(all.log);
  const BlasltTune log = parse_blaslt_tune("log");
  EXPECT_TRUE(log.skinny_only && log.log);
  EXPECT_FALSE(log.all);
}

TEST(BlasltTune, UnknownValueIsAnErrorNamingIt) {
  for (const char* bad : {"1", "ALL", "yes", "all ", "off"}) {
    try {
      parse_blaslt_tune(bad);
      ADD_FAILURE() << "ANVIL_BLASLT_TUNE='" << bad << "' was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("ANVIL_BLASLT_TUNE"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace anvil::gpu
