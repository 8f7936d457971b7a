// decode_stack's hand-off tags (kernels/decode_stack/decode_stack_tags.h): a reader takes a word as the one it waits
// for when its tag matches, so no two writes a reader could confuse may share a tag. Checked on the host for the
// layer counts of real models and at the generation counter's wrap. Also the numbering of the producer's holds.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "kernels/decode_stack/decode_stack_tags.h"

namespace anvil {
namespace {

using namespace decode_stack_tags;

std::set<uint32_t> launch_tags(uint32_t gen, int L) {
  std::set<uint32_t> s;
  for (int l = 0; l < L; l++)
    for (int k = 0; k < kHandoffs; k++) s.insert(tag_of(gen, L, l, k));
  return s;
}

const std::vector<int> kLayers = {1, 2, 16, 32, 80, 126, kMaxLayers};
const std::vector<uint32_t> kGens = {0, 1, 7, 12345, kMod - 2, kMod - 1};

TEST(DecodeStackTags, DistinctAndNonzeroWithinALaunch) {
  for (int L : kLayers)
    for (uint32_t g : kGens) {
      const std::set<uint32_t> s = launch_tags(g, L);
      EXPECT_EQ(s.size(), size_t(kHandoffs * L)) << "L " << L << " gen " << g;
      EXPECT_EQ(s.count(0u), 0u) << "L " << L << " gen " << g;  // the buffers' first contents
      EXPECT_LE(*s.rbegin(), 0xffffu) << "L " << L << " gen " << g;  // 16 bits
    }
}

TEST(DecodeStackTags, ConsecutiveLaunchesShareNoTag) {
  for (int L : kLayers)
    for (uint32_t g : kGens) {
      const std::set<uint32_t> a = launch_tags(g, L), b = launch_tags(next_gen(g), L);
      for (uint32_t t : b) ASSERT_EQ(a.count(t), 0u) << "L " << L << " gen " << g << " -> " << next_gen(g);
    }
}

TEST(DecodeStackTags, NextTagIsTheNextWrite) {
  for (int L : {1, 32, kMaxLayers})
    for (uint32_t g : kGens)
      for (int l = 0; l < L; l++)
        for (int k = 0; k + 1 < kHandoffs; k++)
          ASSERT_EQ(next_tag(tag_of(g, L, l, k)), tag_of(g, L, l, k + 1)) << "L " << L << " gen " << g;
}

// The generation wraps at the tag modulus. A 32-bit counter left to wrap at 2^32 would give launch 2^32 - 1 the
// tags of launch 0 (2^32 - 1 is a multiple of 65535), so the launch after it would take stale words for fresh.
TEST(DecodeStackTags, GenerationWrapsAtTheModulus) {
  EXPECT_EQ(next_gen(kMod - 1), 0u);
  EXPECT_EQ(next_gen(0), 1u);
  EXPECT_EQ(launch_tags(0xffffffffu, 32), launch_tags(0, 32));  // why the counter must not wrap at 2^32
}

// The holds rise along the stream, one per staged hand-off (four a layer, three in layer 0), none before up.
TEST(DecodeStackTags, HoldsRiseAlongTheStream) {
  for (int L : {1, 2, 32, 126}) {
    uint32_t last = 0;
    int holds = 0;
    for (int l = 0; l < L; l++)
      for (int mi = 0; mi < 5; mi++) {
        const uint32_t s = hold_seq(l, mi);
        if (mi == 3 || (l == 0 && mi == 0)) {
          EXPECT_EQ(s, 0u) << "layer " << l << " matrix " << mi;
          continue;
        }
        ASSERT_GT(s, last) << "layer " << l << " matrix " << mi;
        last = s, holds++;
      }
    EXPECT_EQ(holds, 4 * L - 1) << "L " << L;
  }
}

}  // namespace
}  // namespace anvil
