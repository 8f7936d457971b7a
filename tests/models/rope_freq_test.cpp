// rope_inv_freq against the inverse frequencies transformers computes. The arrays below are pasted from
//   python tools/rope_inv_freq_fixture.py      (transformers 5.24.0, torch 2.15, CPU)
// and must match bit for bit: we repeat transformers' f32 operations in its order (see rope_freq.cpp).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/rope/rope.h"

namespace anvil {
namespace {

// kLlama3Theta5e5Hd128: 64 values
constexpr float kLlama3Theta5e5Hd128[] = {
    0x1p+0f, 0x1.a11582p-1f, 0x1.53c38cp-1f, 0x1.14c708p-1f,
    0x1.c2ef78p-2f, 0x1.6f56fap-2f, 0x1.2b3dc6p-2f, 0x1.e788c2p-3f,
    0x1.8d276p-3f, 0x1.43874p-3f, 0x1.078d4p-3f, 0x1.ad6338p-4f,
    0x1.5dc95ap-4f, 0x1.1cf13p-4f, 0x1.d03ccep-5f, 0x1.7a2d08p-5f,
    0x1.34119p-5f, 0x1.f5ea7ep-6f, 0x1.98de92p-6f, 0x1.4d1272p-6f,
    0x1.0f5386p-6f, 0x1.ba0dd8p-7f, 0x1.681adap-7f, 0x1.2558fep-7f,
    0x1.ddee9ep-8f, 0x1.8554ecp-8f, 0x1.3d2804p-8f, 0x1.025c6ap-8f,
    0x1.a4ee4p-9f, 0x1.1bfa0cp-9f, 0x1.67a23ap-10f, 0x1.c12f3cp-11f,
    0x1.132ba4p-11f, 0x1.47e21p-12f, 0x1.765ba4p-13f, 0x1.90d10cp-14f,
    0x1.46831ap-14f, 0x1.09fb7ep-14f, 0x1.b15902p-15f, 0x1.610332p-15f,
    0x1.1f91fp-15f, 0x1.d484dep-16f, 0x1.7da9e8p-16f, 0x1.36e8eap-16f,
    0x1.fa8b86p-17f, 0x1.9ca3eap-17f, 0x1.5024d6p-17f, 0x1.11d41ep-17f,
    0x1.be2188p-18f, 0x1.6b6d0ep-18f, 0x1.280d96p-18f, 0x1.e257p-19f,
    0x1.88ec2p-19f, 0x1.4014d2p-19f, 0x1.04be68p-19f, 0x1.a8d01p-20f,
    0x1.5a0f4ep-20f, 0x1.19e8p-20f, 0x1.cb4a9ap-21f, 0x1.76258ep-21f,
    0x1.30c94ep-21f, 0x1.f09184p-22f, 0x1.94836p-22f, 0x1.4985fep-22f,
};
// kDefaultTheta5e5Hd128: 64 values
constexpr float kDefaultTheta5e5Hd128[] = {
    0x1p+0f, 0x1.a11582p-1f, 0x1.53c38cp-1f, 0x1.14c708p-1f,
    0x1.c2ef78p-2f, 0x1.6f56fap-2f, 0x1.2b3dc6p-2f, 0x1.e788c2p-3f,
    0x1.8d276p-3f, 0x1.43874p-3f, 0x1.078d4p-3f, 0x1.ad6338p-4f,
    0x1.5dc95ap-4f, 0x1.1cf13p-4f, 0x1.d03ccep-5f, 0x1.7a2d08p-5f,
    0x1.34119p-5f, 0x1.f5ea7ep-6f, 0x1.98de92p-6f, 0x1.4d1272p-6f,
    0x1.0f5386p-6f, 0x1.ba0dd8p-7f, 0x1.681adap-7f, 0x1.2558fep-7f,
    0x1.ddee9ep-8f, 0x1.8554ecp-8f, 0x1.3d2804p-8f, 0x1.025c6ap-8f,
    0x1.a4ee4p-9f, 0x1.56e5b8p-9f, 0x1.175482p-9f, 0x1.c7182p-10f,
    0x1.72ba42p-10f, 0x1.2e0046p-10f, 0x1.ec07d4p-11f, 0x1.90d10cp-11f,
    0x1.46831ap-11f, 0x1.09fb7ep-11f, 0x1.b15902p-12f, 0x1.610332p-12f,
    0x1.1f91fp-12f, 0x1.d484dep-13f, 0x1.7da9e8p-13f, 0x1.36e8eap-13f,
    0x1.fa8b86p-14f, 0x1.9ca3eap-14f, 0x1.5024d6p-14f, 0x1.11d41ep-14f,
    0x1.be2188p-15f, 0x1.6b6d0ep-15f, 0x1.280d96p-15f, 0x1.e257p-16f,
    0x1.88ec2p-16f, 0x1.4014d2p-16f, 0x1.04be68p-16f, 0x1.a8d01p-17f,
    0x1.5a0f4ep-17f, 0x1.19e8p-17f, 0x1.cb4a9ap-18f, 0x1.76258ep-18f,
    0x1.30c94ep-18f, 0x1.f09184p-19f, 0x1.94836p-19f, 0x1.4985fep-19f,
};
// kDefaultTheta1e4Hd64: 32 values
constexpr float kDefaultTheta1e4Hd64[] = {
    0x1p+0f, 0x1.7ff222p-1f, 0x1.1feb34p-1f, 0x1.afd136p-2f,
    0x1.43d136p-2f, 0x1.e5a846p-3f, 0x1.6c310ep-3f, 0x1.111aeep-3f,
    0x1.99999ap-4f, 0x1.33281ap-4f, 0x1.ccab84p-5f, 0x1.59742ap-5f,
    0x1.030dc6p-5f, 0x1.84869ep-6f, 0x1.235a72p-6f, 0x1.b4f7e4p-7f,
    0x1.47ae14p-7f, 0x1.eb736p-8f, 0x1.708938p-8f, 0x1.145ceep-8f,
    0x1.9e7c7p-9f, 0x1.36d21ap-9f, 0x1.d22a5p-10f, 0x1.5d931cp-10f,
    0x1.0624dep-10f, 0x1.892918p-11f, 0x1.26d42cp-11f, 0x1.ba2e4ap-12f,
    0x1.4b96cp-12f, 0x1.f1502ap-13f, 0x1.74eea6p-13f, 0x1.17a8e4p-13f,
};

// Equal bits (so -0 != +0 and a NaN would fail), with the index of the first difference in the message.
template <size_t K>
void expect_bits_equal(const float (&want)[K], const std::vector<float>& got) {
  ASSERT_EQ(got.size(), K);
  for (size_t i = 0; i < K; i++) {
    uint32_t a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    EXPECT_EQ(a, b) << "inv_freq[" << i << "]: transformers " << want[i] << ", anvil " << got[i];
  }
}

TEST(RopeInvFreq, Llama3MatchesTransformers) {
  RopeConfig cfg;
  cfg.theta = 500000;
  cfg.type = "llama3";
  cfg.factor = 8;
  cfg.low_freq_factor = 1;
  cfg.high_freq_factor = 4;
  cfg.original_max_position = 8192;
  expect_bits_equal(kLlama3Theta5e5Hd128, rope_inv_freq(cfg, 128));
}

TEST(RopeInvFreq, DefaultMatchesTransformers) {
  RopeConfig cfg;
  cfg.theta = 500000;
  expect_bits_equal(kDefaultTheta5e5Hd128, rope_inv_freq(cfg, 128));
  cfg.theta = 10000;
  expect_bits_equal(kDefaultTheta1e4Hd64, rope_inv_freq(cfg, 64));
}

TEST(RopeInvFreq, BadConfigThrows) {
  RopeConfig cfg;
  EXPECT_THROW(rope_inv_freq(cfg, 127), Error);
  cfg.type = "yarn";
  EXPECT_THROW(rope_inv_freq(cfg, 128), Error);
  cfg.type = "llama3";
  cfg.high_freq_factor = 0.5;
  EXPECT_THROW(rope_inv_freq(cfg, 128), Error);
}

}  // namespace
}  // namespace anvil
