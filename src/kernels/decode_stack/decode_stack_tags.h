// The tags of decode_stack's hand-offs (decode_stack_gpu.cuh has why): a 16-bit tag names each write of an
// activation, so a reader knows a word is the one it waits for; and the numbers of the producer's holds. Host and
// device, so a CPU test checks the schemes.
//
// tag = 1 + (gen * kHandoffs * L + layer * kHandoffs + k) mod 65535, for the launch generation gen, L layers and
// hand-off k of a layer. 0 is never a tag (the buffers start zeroed). Within a launch the kHandoffs * L tags are
// distinct while kHandoffs * L <= 65535; a launch's and the one before's are distinct while 2 kHandoffs L < 65535,
// provided consecutive generations differ by 1 mod 65535: the generation itself wraps at 65535 (next_gen). A
// 32-bit counter wrapping at 2^32 would not: 2^32 - 1 is 0 mod 65535, so after 2^32 - 1 launches two consecutive
// ones would have shared every tag.
#pragma once
#include <cstdint>

#include "core/dtype.h"  // ANVIL_HD

namespace anvil::decode_stack_tags {

constexpr int kHandoffs = 5;  // per layer: q|k|v, attention output, o's output, down's input, down's output
constexpr uint32_t kMod = 65535;
constexpr int kMaxLayers = int((kMod - 1) / (2 * kHandoffs));  // 2 kHandoffs L < kMod

ANVIL_HD uint32_t tag_of(uint32_t gen, int L, int layer, int k) {
  const uint64_t n = uint64_t(gen) * uint64_t(kHandoffs * L) + uint64_t(layer * kHandoffs + k);
  return 1u + uint32_t(n % kMod);
}
// The tag of the hand-off after the one tagged t (index + 1).
ANVIL_HD uint32_t next_tag(uint32_t t) { return t == kMod ? 1u : t + 1u; }
// The generation of the next launch.
ANVIL_HD uint32_t next_gen(uint32_t gen) { return (gen + 1u) % kMod; }

// The producer's holds (decode_stack_gpu.cuh): matrix mi of layer l (q|k|v, o, gate, up, down) and the hand-off
// whose staging it waits for, numbered in stream order: q|k|v of layer l >= 1 (after down's output), o (the
// attention output), gate (o's output), down (its input); 0 for none (layer 0's q|k|v, up). The producer waits
// until the block's count of staged hand-offs reaches the number, so the numbers must rise along the stream: a
// matrix waiting for a later hand-off than its own would wait for its own output.
ANVIL_HD uint32_t hold_seq(int l, int mi) {
  switch (mi) {
    case 0: return 4u * uint32_t(l);
    case 1: return 4u * uint32_t(l) + 1u;
    case 2: return 4u * uint32_t(l) + 2u;
    case 4: return 4u * uint32_t(l) + 3u;
    default: return 0u;
  }
}

}  // namespace anvil::decode_stack_tags
