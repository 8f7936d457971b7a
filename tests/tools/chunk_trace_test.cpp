// tools/chunk_trace.py (the summary of decode_stack's chunk timelines, decode_stack_chunk_trace.cuh) on a hand-made
// trace whose schedule is known: the numbers it prints are the ones the docs quote from real traces.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tool_test_util.h"

namespace anvil::test {
namespace {

bool has_numpy() { return python_has("numpy"); }

// Two blocks of 1024 chunks at a 1 GHz clock (1 cycle = 1 ns). Block 0's producer starts waiting for chunk j's
// slot at 1000 + 1000 j, has it 100 ns later and issues the copy 200 ns after that; the consumer starts waiting
// 100 ns after the issue (even j) or 100 ns before it (odd j), sees the chunk 500 ns after the issue and releases
// it 800 ns later. Block 1 runs the same schedule at half the speed (every stamp doubled).
// Block 1 stops stamping after `last1` chunks (a shorter stream: the rest stay zero).
std::string trace(const TempDir& dir, int last1 = 1024) {
  constexpr int64_t kBlocks = 2, kChunks = 1024, kFirst = 256, kEvents = 6, kKhz = 1000000;
  std::vector<uint64_t> s(kBlocks * kChunks * kEvents);
  for (int b = 0; b < kBlocks; b++) {
    for (int j = 0; j < kChunks; j++) {
      const uint64_t e0 = 1000 + 1000 * uint64_t(j), e2 = e0 + 300, e3 = j % 2 ? e2 - 100 : e2 + 100;
      const uint64_t ev[kEvents] = {e0, e0 + 100, e2, e3, e2 + 500, e2 + 1300};
      for (int e = 0; e < kEvents; e++)
        s[(b * kChunks + j) * kEvents + e] = b == 1 && j >= last1 ? 0 : ev[e] * uint64_t(b + 1);
    }
  }
  int64_t head[6] = {0, kBlocks, kChunks, kFirst, kEvents, kKhz};
  std::memcpy(&head[0], "ANVILCT1", 8);
  const std::string path = dir.file("chunks.bin");
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(head), sizeof(head));
  f.write(reinterpret_cast<const char*>(s.data()), std::streamsize(s.size() * sizeof(s[0])));
  return path;
}

std::string summary(const std::string& args) { return tool_output("chunk_trace.py", args); }

TEST(ChunkTrace, ProducerCopiesConsumersAndPhaseSpread) {
  if (!has_numpy()) GTEST_SKIP() << "python3 with numpy not found";
  TempDir dir;
  const std::string path = trace(dir);
  const std::string out = summary(path + " --period 4 --phase first4:0-3 --phase odd:1-1 --block 1 --timeline 2");
  // One chunk per 1000 ns on block 0 and per 2000 ns on block 1.
  EXPECT_NE(out.find("2 blocks x 1024 chunks; one chunk issued every 1.500 µs per block"), std::string::npos) << out;
  // Block 0's 100 / 200 / 700 ns, block 1's twice that: p10 is block 0's, p90 block 1's.
  EXPECT_NE(out.find("waits for the slot                   mean  0.150  p10  0.100  p50  0.150  p90  0.200"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("slot free -> copy issued             mean  0.300  p10  0.200"), std::string::npos) << out;
  EXPECT_NE(out.find("issued -> next chunk's wait          mean  1.050  p10  0.700"), std::string::npos) << out;
  // Chunk j + 12 reuses chunk j's slot: claimed 12 * 1000 + 100 - 1600 ns after the release.
  EXPECT_NE(out.find("slot released -> claimed (12 slots)  mean 15.750  p10 10.500"), std::string::npos) << out;
  EXPECT_NE(out.find("issued -> seen full                  mean  0.750  p10  0.500"), std::string::npos) << out;
  EXPECT_NE(out.find("consumer waiting before the copy was issued: 50.0% of chunks"), std::string::npos) << out;
  // A period of 4 chunks: from chunk 0's arrival to chunk 3's release, 3000 + 800 ns on block 0.
  EXPECT_NE(out.find("first4     256 periods: block mean   5.70 µs, p10   3.80, p90   7.60, slowest block (mean over "
                     "periods)   7.60"),
            std::string::npos)
      << out;
  // The phase's chunks alone: chunk 1 of each period (odd j), whose consumer waits 600 ns (block 0) or 1200.
  EXPECT_NE(out.find("    consumer's wait                    mean  0.900  p10  0.600  p50  0.900  p90  1.200"),
            std::string::npos)
      << out;
  // Block 1's stamps from its own first one (2000 cycles): chunk 257's slot wait begins 2 µs in.
  EXPECT_NE(out.find("   257      2.00     2.20     2.60 |     2.40     3.60     5.20"), std::string::npos) << out;
}

TEST(ChunkTrace, ReadsTheChunksEveryBlockStamped) {
  if (!has_numpy()) GTEST_SKIP() << "python3 with numpy not found";
  TempDir dir;
  // Block 1 stamped 1000 chunks: the summary covers those on both blocks, at the same rates.
  const std::string out = summary(trace(dir, 1000));
  EXPECT_NE(out.find("2 blocks x 1000 chunks; one chunk issued every 1.500 µs per block"), std::string::npos) << out;
  // One chunk is not a rate: refused.
  const std::string msg = tool_refusal(dir, "chunk_trace.py", trace(dir, 1));
  EXPECT_NE(msg.find("has 1 chunk(s) that every block stamped, expected 2 or more"), std::string::npos) << msg;
}

TEST(ChunkTrace, RejectsAFileThatIsNotATrace) {
  if (!has_numpy()) GTEST_SKIP() << "python3 with numpy not found";
  TempDir dir;
  const std::string path = dir.file("other.bin");
  std::ofstream(path) << "not a trace\n";
  const std::string msg = tool_refusal(dir, "chunk_trace.py", path);
  EXPECT_NE(msg.find("is not a chunk trace (expected the magic b'ANVILCT1' and a 48-byte header)"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace anvil::test
