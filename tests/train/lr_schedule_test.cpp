#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "train/lr_schedule.h"

using namespace anvil;

TEST(LrSchedule, CosineWithWarmupMatchesClosedForm) {
  LrSchedule s;
  s.kind = "cosine";
  s.peak = 1e-3;
  s.steps = 110;
  s.warmup = 10;
  s.min_ratio = 0.1;
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-4);  // (0 + 1) / 10 of peak
  EXPECT_DOUBLE_EQ(s.lr(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);  // p = 0
  // p = (s - 10) / 99; lr = 1e-4 + 9e-4 * (1 + cos(pi p)) / 2
  for (int64_t st : {10, 30, 59, 60, 100, 109}) {
    double p = double(st - 10) / 99.0;
    EXPECT_NEAR(s.lr(st), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(M_PI * p)), 1e-15) << st;
  }
  EXPECT_NEAR(s.lr(109), 1e-4, 1e-15);  // the last step runs at min
}

TEST(LrSchedule, CosineWithoutWarmupStartsAtPeak) {
  LrSchedule s;
  s.peak = 2.0;
  s.steps = 5;
  s.min_ratio = 0;
  EXPECT_DOUBLE_EQ(s.lr(0), 2.0);
  EXPECT_NEAR(s.lr(2), 1.0, 1e-15);  // p = 1/2
  EXPECT_NEAR(s.lr(4), 0.0, 1e-15);
}

TEST(LrSchedule, WsdMatchesClosedForm) {
  LrSchedule s;
  s.kind = "wsd";
  s.peak = 1.0;
  s.steps = 100;
  s.warmup = 5;
  s.decay_fraction = 0.2;  // D = 20 steps: 80..99
  s.min_ratio = 0.0;
  ASSERT_EQ(s.decay_steps(), 20);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.2);
  EXPECT_DOUBLE_EQ(s.lr(4), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(5), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(79), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(80), 1.0 - 1.0 / 20);
  EXPECT_DOUBLE_EQ(s.lr(89), 1.0 - 10.0 / 20);
  EXPECT_DOUBLE_EQ(s.lr(99), 0.0);
  s.min_ratio = 0.1;
  EXPECT_DOUBLE_EQ(s.lr(89), 1.0 + (0.1 - 1.0) * 10.0 / 20);
  EXPECT_DOUBLE_EQ(s.lr(99), 0.1);
}

TEST(LrSchedule, ImpossibleValuesAreRejected) {
  LrSchedule s;
  s.steps = 10;
  EXPECT_NO_THROW(s.validate());
  s.kind = "linear";
  EXPECT_THROW(s.validate(), Error);
  s.kind = "wsd";
  s.warmup = 9;
  s.decay_fraction = 0.5;  // 9 + 5 > 10
  try {
    s.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_steps"), std::string::npos) << e.what();
  }
  s = LrSchedule{};
  s.peak = -1;
  EXPECT_THROW(s.validate(), Error);
}
