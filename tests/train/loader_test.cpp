#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "test_data.h"
#include "train/loader.h"

using namespace anvil;

namespace {

std::vector<int32_t> flat(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

std::shared_ptr<TokenStream> stream(const std::string& dir) { return std::make_shared<TokenStream>(dir, "train"); }

}  // namespace

TEST(Loader, WindowsAreShiftedPairsSpanningShards) {
  train_test::Scratch root_scratch("loader_windows");
  const std::string& root = root_scratch.path;
  std::string data = train_test::make_dataset(root, 200, 0.0, 300);  // many small shards: windows cross them
  auto s = stream(data);
  ASSERT_GT(s->meta().splits.at("train").shards.size(), 5u);
  const int64_t T = 37;
  BatchLoader l(s, 4, T, 1, false);
  EXPECT_EQ(l.windows(), (s->size() - 1) / T);
  std::vector<int32_t> all(size_t(s->size()));
  s->read(0, s->size(), all.data());
  for (int64_t w : {int64_t(0), int64_t(9), l.windows() - 1}) {
    Batch b = l.windows_at(w, 1);
    auto ids = flat(b.ids), tg = flat(b.targets);
    for (int64_t t = 0; t < T; t++) {
      EXPECT_EQ(ids[size_t(t)], all[size_t(w * T + t)]);
      EXPECT_EQ(tg[size_t(t)], all[size_t(w * T + t + 1)]);
    }
  }
  Batch b = l.next();
  EXPECT_EQ(b.ids.shape(), (Shape{4, T}));
  EXPECT_EQ(flat(b.ids), flat(l.windows_at(0, 4).ids)) << "no shuffle: stream order";
}

TEST(Loader, ShuffleIsDeterministicAndCoversEachWindowOncePerEpoch) {
  // Token i of this stream is i, so a window's first input names the window.
  train_test::Scratch dir_scratch("loader_shuffle");
  const std::string& dir = dir_scratch.path;
  const int64_t N = 5001, B = 3, T = 16;
  std::vector<int32_t> tokens(N);
  for (int64_t i = 0; i < N; i++) tokens[size_t(i)] = int32_t(i);
  ShardInfo in;
  in.vocab_size = uint32_t(N);
  in.eos_id = 0;
  write_shard(dir + "/train-00000.tok", tokens, in);
  DatasetMeta m;
  m.vocab_size = uint32_t(N);
  m.eos_id = 0;
  m.splits["train"] = {{"train-00000.tok"}, N, 1};
  write_dataset_meta(dir, m);
  auto s = stream(dir);
  BatchLoader a(s, B, T, 11, true), b(s, B, T, 11, true), c(s, B, T, 12, true);
  ASSERT_EQ(a.windows(), (N - 1) / T);
  int64_t per_epoch = a.windows() / B;
  std::set<int32_t> seen;
  bool differs = false, shuffled = false;
  for (int64_t i = 0; i < per_epoch; i++) {
    Batch x = a.next(), y = b.next(), z = c.next();
    EXPECT_EQ(flat(x.ids), flat(y.ids));
    differs |= flat(x.ids) != flat(z.ids);
    for (int64_t r = 0; r < B; r++) {
      int32_t first = x.ids.data<int32_t>()[r * T];
      EXPECT_EQ(first % T, 0);
      EXPECT_EQ(x.targets.data<int32_t>()[r * T + T - 1], first + T);
      shuffled |= first != (i * B + r) * T;
      EXPECT_TRUE(seen.insert(first).second) << "window " << first / T << " twice in one epoch";
    }
  }
  EXPECT_TRUE(shuffled);
  EXPECT_TRUE(differs) << "another seed gives another order";
  EXPECT_EQ(int64_t(seen.size()), per_epoch * B);
  EXPECT_EQ(a.state(), (LoaderState{1, 0}));
  BatchLoader fresh(s, B, T, 11, true);
  EXPECT_NE(flat(a.next().ids), flat(fresh.next().ids)) << "epoch 1 has its own order";
}

TEST(Loader, StateRestoresTheExactSequence) {
  train_test::Scratch root_scratch("loader_state");
  const std::string& root = root_scratch.path;
  auto s = stream(train_test::make_dataset(root, 150, 0.0));
  BatchLoader a(s, 5, 24, 3, true);
  std::vector<std::vector<int32_t>> ref;
  LoaderState mid;
  int64_t n = a.windows() / 5 * 2 + 3;  // across an epoch boundary
  for (int64_t i = 0; i < n; i++) {
    if (i == n / 2 + 1) mid = a.state();
    ref.push_back(flat(a.next().ids));
  }
  BatchLoader b(s, 5, 24, 3, true);
  b.set_state(mid);
  for (int64_t i = n / 2 + 1; i < n; i++) EXPECT_EQ(flat(b.next().ids), ref[size_t(i)]) << i;
  EXPECT_THROW(b.set_state({0, b.windows()}), Error);
}

TEST(Loader, TooLittleDataIsAClearError) {
  train_test::Scratch root_scratch("loader_small");
  const std::string& root = root_scratch.path;
  auto s = stream(train_test::make_dataset(root, 5, 0.0));
  try {
    BatchLoader l(s, 64, 128, 0, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("windows"), std::string::npos) << e.what();
  }
}
