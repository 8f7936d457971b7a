#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io_test_util.h"

using namespace anvil;
using anvil::test::expect_error;
using anvil::test::TempDir;

namespace {

// The canonical tensors; tools/check_safetensors.py builds the same ones from the same formulas.
NamedTensors canonical() {
  auto floats = [](const Shape& shape, DType dt) {
    std::vector<float> v(size_t(shape_numel(shape)));
    for (size_t i = 0; i < v.size(); i++) v[i] = float(int(i % 17) - 8) * 0.25f;  // exact down to FP8 e5m2
    return Tensor::from_floats(v, shape, dt);
  };
  auto ints = [](const Shape& shape, DType dt, auto fn) {
    Tensor t = Tensor::empty(shape, dt);
    for (int64_t k = 0; k < t.numel(); k++) {
      if (dt == DType::i32) t.data<int32_t>()[k] = int32_t(fn(k));
      if (dt == DType::i64) t.data<int64_t>()[k] = fn(k);
      if (dt == DType::u8) t.data<uint8_t>()[k] = uint8_t(fn(k));
    }
    return t;
  };
  return {{"f32", floats({3, 5}, DType::f32)},
          {"bf16", floats({4, 3}, DType::bf16)},
          {"f16", floats({7}, DType::f16)},
          {"f8_e4m3", floats({2, 4}, DType::e4m3fn)},
          {"f8_e5m2", floats({5}, DType::e5m2)},
          {"i32", ints({2, 3}, DType::i32, [](int64_t k) { return 7 * k - 20; })},
          {"i64", ints({3}, DType::i64, [](int64_t k) { return 1000000007LL * k - 5; })},
          {"u8", ints({6}, DType::u8, [](int64_t k) { return (37 * k) % 256; })},
          {"scalar", Tensor::from_floats({3.5f}, {}, DType::f32)},
          {"empty", Tensor::zeros({0, 4}, DType::f32)}};
}
const std::map<std::string, std::string> kMeta = {{"format", "pt"}, {"source", "anvil-interop"}};

void expect_same(const Tensor& got, const Tensor& want, const std::string& name) {
  ASSERT_EQ(got.dtype(), want.dtype()) << name;
  ASSERT_EQ(got.shape(), want.shape()) << name;
  Tensor g = got.to(Device::cpu()).contiguous(), w = want.to(Device::cpu()).contiguous();
  EXPECT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), w.nbytes()), 0) << name << " differs bitwise";
}

template <class File>
void expect_canonical(const File& f) {
  for (auto& [name, t] : canonical()) {
    ASSERT_TRUE(f.contains(name)) << name;
    expect_same(f.get(name), t, name);
  }
}

// A file from a raw header string and data bytes: u64 length | header | data.
std::string raw_file(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

}  // namespace

TEST(Safetensors, RoundTripKeepsOrderMetadataAndBits) {
  TempDir dir;
  std::string path = dir.file("a.safetensors");
  save_safetensors(path, canonical(), kMeta);
  SafetensorsFile f(path);
  std::vector<std::string> order;
  for (auto& [n, t] : canonical()) order.push_back(n);
  EXPECT_EQ(f.names(), order);
  EXPECT_EQ(f.metadata(), kMeta);
  expect_canonical(f);
  uint64_t n;
  std::memcpy(&n, test::read_bytes(path).data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded so the data section starts 8-byte aligned";
  EXPECT_EQ(dir.list(), std::vector<std::string>{"a.safetensors"}) << "no temporary file left behind";
}

TEST(Safetensors, GetIsZeroCopyAndOutlivesTheFileObject) {
  TempDir dir;
  std::string path = dir.file("a.safetensors");
  save_safetensors(path, {{"w", Tensor::from_floats({1, 2, 3, 4}, {2, 2}, DType::f32)}});
  Tensor t;
  {
    SafetensorsFile f(path);
    t = f.get("w");
    EXPECT_EQ(f.get("w").data_ptr(), t.data_ptr()) << "both views point into the one mapping";
    EXPECT_EQ(f.entry("w").end - f.entry("w").begin, 16u);
  }
  EXPECT_EQ(t.to_floats(), (std::vector<float>{1, 2, 3, 4}));
  t.data<float>()[0] = 9;  // copy-on-write mapping: allowed, and the file keeps its bytes
  EXPECT_EQ(SafetensorsFile(path).get("w").to_floats()[0], 1.f);
}

TEST(Safetensors, WritesStridedTensorsAndMisalignedOffsetsReadBack) {
  TempDir dir;
  std::string path = dir.file("a.safetensors");
  Tensor m = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32);
  // u8[3] first puts the f32 tensor at data offset 3: legal in the format, so the reader must cope.
  save_safetensors(path, {{"u", Tensor::from_floats({1, 2, 3}, {3}, DType::u8)}, {"mt", m.transpose(0, 1)}});
  SafetensorsFile f(path);
  Tensor mt = f.get("mt");
  EXPECT_EQ(f.entry("mt").begin, 3u);
  EXPECT_EQ(mt.shape(), (Shape{3, 2}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mt.data_ptr()) % 4, 0u);
  EXPECT_EQ(mt.to_floats(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Safetensors, ReadsTheCommittedPythonFixture) {
  SafetensorsFile f(std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures/safetensors/python_canonical.safetensors");
  EXPECT_EQ(f.metadata(), kMeta);
  EXPECT_EQ(f.names().size(), canonical().size());
  expect_canonical(f);
}

TEST(Safetensors, EveryCorruptionIsANamedError) {
  TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  auto open_bad = [&](const std::string& bytes, std::initializer_list<std::string> parts) {
    test::write_bytes(p, bytes);
    expect_error([&] { SafetensorsFile f(p); }, parts);
  };
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  const std::string data16(16, '\0');
  // The well-formed baseline opens.
  test::write_bytes(p, raw_file("{" + ok_entry + "}", data16));
  EXPECT_NO_THROW(SafetensorsFile f(p));

  open_bad("", {p, "truncated"});
  open_bad("abc", {p, "at least 8 bytes", "truncated"});
  std::string good = raw_file("{" + ok_entry + "}", data16);
  open_bad(good.substr(0, 20), {p, "header length", "truncated"});                 // cut inside the header
  open_bad(good.substr(0, good.size() - 4), {p, "'w'", "beyond the file size"});  // cut inside the data
  {
    uint64_t huge = 200'000'000;
    std::string b(reinterpret_cast<const char*>(&huge), 8);
    open_bad(b + std::string(64, ' '), {p, "too long"});
  }
  open_bad(raw_file("", ""), {p, "empty header"});
  open_bad(raw_file("[1,2]", ""), {p, "starting with '{'"});
  open_bad(raw_file("{\"w\": {\"dtype\": ", data16), {p, "bad JSON"});
  open_bad(raw_file(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", data16),
           {p, "'w'", "unsupported dtype 'F64'"});
  open_bad(raw_file(R"({"w":{"dtype":"BOOL","shape":[16],"data_offsets":[0,16]}})", data16),
           {p, "'w'", "unsupported dtype 'BOOL'"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,1000]}})", data16),
           {p, "'w'", "beyond the file size"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", data16),
           {p, "'w'", "to span 16 bytes", "12 bytes"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]}})", data16),
           {p, "'w'", "non-negative"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,16]}})", data16),
           {p, "'w'", "representable size"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})", data16),
           {p, "'w'", "begin <= end"});
  open_bad(raw_file(R"({"w":{"dtype":"F32","shape":[2,2]}})", data16), {p, "'w'", "data_offsets"});
  open_bad(raw_file(R"({"w":{"shape":[2,2],"data_offsets":[0,16]}})", data16), {p, "'w'", "dtype"});
  open_bad(raw_file(R"({"w":[0,16]})", data16), {p, "'w'"});
  open_bad(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    data16),
           {p, "overlapping", "'a'", "'b'"});
  open_bad(raw_file(R"({"__metadata__":{"format":1}})", ""), {p, "__metadata__", "format"});
  expect_error([&] { SafetensorsFile f(dir.file("missing.safetensors")); }, {"missing.safetensors", "No such file"});
  expect_error([&] { SafetensorsFile f(dir.path().string()); }, {"a regular file"});
  test::write_bytes(p, good);
  expect_error([&] { SafetensorsFile(p).get("nope"); }, {p, "'nope'"});
}

TEST(Safetensors, ShardedIndexWithTwoShards) {
  TempDir dir;
  NamedTensors all = canonical();
  NamedTensors a(all.begin(), all.begin() + 4), b(all.begin() + 4, all.end());
  save_safetensors(dir.file("model-00001-of-00002.safetensors"), a, {{"format", "pt"}});
  save_safetensors(dir.file("model-00002-of-00002.safetensors"), b, {{"format", "pt"}});
  nlohmann::json idx = {{"metadata", {{"total_size", 1234}}}, {"weight_map", nlohmann::json::object()}};
  for (auto& [n, t] : a) idx["weight_map"][n] = "model-00001-of-00002.safetensors";
  for (auto& [n, t] : b) idx["weight_map"][n] = "model-00002-of-00002.safetensors";
  test::write_bytes(dir.file("model.safetensors.index.json"), idx.dump());

  SafetensorsIndex ck = open_checkpoint(dir.path().string());
  EXPECT_EQ(ck.shards().size(), 2u);
  EXPECT_EQ(ck.names().size(), all.size());
  EXPECT_TRUE(std::is_sorted(ck.names().begin(), ck.names().end()));
  EXPECT_EQ(ck.metadata().at("total_size"), "1234");
  expect_canonical(ck);
  EXPECT_EQ(ck.entry("i64").dtype, DType::i64);
  EXPECT_EQ(ck.load("bf16", Device::cpu(), DType::f32).to_floats(), all[1].second.to_floats());
  expect_error([&] { ck.get("nope"); }, {"'nope'", dir.path().string()});

  // The index file itself may be given, too.
  EXPECT_EQ(open_checkpoint(dir.file("model.safetensors.index.json")).names(), ck.names());

  // Broken indexes.
  auto bad_index = [&](nlohmann::json j, std::initializer_list<std::string> parts) {
    test::write_bytes(dir.file("model.safetensors.index.json"), j.dump());
    expect_error([&] { open_checkpoint(dir.path().string()); }, parts);
  };
  nlohmann::json j = idx;
  j["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
  bad_index(j, {"'ghost'", "no such tensor in that shard"});
  j = idx;
  j["weight_map"]["f32"] = "model-00003-of-00002.safetensors";
  bad_index(j, {"model-00003-of-00002.safetensors", "No such file"});
  j = idx;
  j["weight_map"]["f32"] = "../model-00001-of-00002.safetensors";
  bad_index(j, {"inside the checkpoint directory", "'f32'"});
  bad_index(nlohmann::json{{"metadata", {}}}, {"weight_map"});
  test::write_bytes(dir.file("model.safetensors.index.json"), "{not json");
  expect_error([&] { open_checkpoint(dir.path().string()); }, {"bad JSON", "model.safetensors.index.json"});
}

TEST(Safetensors, SingleFileCheckpointDirectory) {
  TempDir dir;
  expect_error([&] { open_checkpoint(dir.path().string()); }, {"model.safetensors.index.json", "neither"});
  save_safetensors(dir.file("model.safetensors"), canonical(), kMeta);
  SafetensorsIndex ck = open_checkpoint(dir.path().string());
  EXPECT_EQ(ck.shards().size(), 1u);
  EXPECT_EQ(ck.metadata(), kMeta);
  expect_canonical(ck);
  expect_canonical(open_checkpoint(dir.file("model.safetensors")));
  expect_error([&] { open_checkpoint(dir.file("nothing_here")); }, {"no such path"});
}

TEST(Safetensors, AtomicWriteNeverLeavesAHalfWrittenFile) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, canonical(), kMeta);
  const std::string before = test::read_bytes(path);

  // A bad argument: nothing written, nothing left over.
  expect_error([&] { save_safetensors(path, {{"x", Tensor::zeros({2}, DType::f32)}, {"x", Tensor()}}); },
               {"unique tensor names", "'x'"});
  expect_error([&] { save_safetensors(path, {{"x", Tensor::zeros({2}, DType::e4m3fnuz)}}); }, {"e4m3fnuz"});
  EXPECT_EQ(dir.list(), std::vector<std::string>{"model.safetensors"});

  // A write that fails half way (the disk-full case): a 64 KiB file-size limit makes write() fail with EFBIG
  // once the limit is reached (SIGXFSZ ignored so the process survives to see the error).
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 64 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  bool threw = false;
  try {
    save_safetensors(path, {{"big", Tensor::zeros({1 << 20}, DType::f32)}});
  } catch (const Error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("File too large"), std::string::npos) << e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"model.safetensors"}) << "the temporary file was removed";
  EXPECT_EQ(test::read_bytes(path), before) << "the previous checkpoint is untouched";

  expect_error([&] { save_safetensors(dir.file("no/such/dir/x.safetensors"), canonical()); },
               {"no/such/dir/x.safetensors.tmp.", "No such file"});
}

TEST(Safetensors, LoadConvertsDtypesPerTensor) {
  std::vector<float> v = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.f, -0.0f};
  Tensor f32 = Tensor::from_floats(v, {2, 3}, DType::f32);
  EXPECT_EQ(load_tensor(f32, Device::cpu(), DType::f32).data_ptr(), f32.data_ptr()) << "same dtype on CPU: no copy";
  for (DType dt : {DType::bf16, DType::f16, DType::e4m3fn, DType::e5m2}) {
    Tensor narrow = load_tensor(f32, Device::cpu(), dt);
    ASSERT_EQ(narrow.dtype(), dt);
    std::vector<float> got = narrow.to_floats();
    for (size_t i = 0; i < v.size(); i++) EXPECT_EQ(got[i], round_to(dt, v[i])) << dtype_name(dt) << " " << v[i];
    EXPECT_EQ(load_tensor(narrow, Device::cpu(), DType::f32).to_floats(), got) << "widening is exact";
  }
  Tensor dst = Tensor::empty({3, 2}, DType::f32);
  expect_error([&] { load_into(dst, f32); }, {"load_into", "[2,3]"});
  Tensor i32 = Tensor::zeros({2, 3}, DType::i32);
  expect_error([&] { load_tensor(i32, Device::cpu(), DType::f32); }, {"integers must match"});
}

// Runs only where a GPU is present (the lead's H200 run): bf16 -> f32 through the staging buffer in 3 chunks.
TEST(Safetensors, LoadToGpuThroughBoundedStaging) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  const int64_t n = (int64_t(9) << 20) + 3;  // f32 output 36 MiB + 12 bytes: 16 + 16 + 4 MiB chunks, odd tail
  Tensor src = Tensor::empty({n}, DType::bf16);
  for (int64_t i = 0; i < n; i++) src.data<bf16>()[i] = bf16{f32_to_bf16(float(i % 1001) - 500.f)};
  Tensor g = load_tensor(src, Device::gpu(0), DType::f32);
  EXPECT_EQ(g.device(), Device::gpu(0));
  std::vector<float> back = g.to_floats();
  // Values above 256 in magnitude are not all bf16 numbers (8 significant bits): compare with the rounded ones.
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(back[size_t(i)], round_to(DType::bf16, float(i % 1001) - 500.f)) << i;
  EXPECT_EQ(back[size_t(n - 1)], round_to(DType::bf16, float((n - 1) % 1001) - 500.f));
  // And the other way, GPU tensors are written through the staging buffer too.
  TempDir dir;
  save_safetensors(dir.file("g.safetensors"), {{"g", g}});
  EXPECT_EQ(SafetensorsFile(dir.file("g.safetensors")).get("g").to_floats(), back);
}

TEST(Safetensors, PythonInteropBothWays) {
  TempDir dir;
  const std::string tool = std::string("python3 ") + ANVIL_SOURCE_DIR + "/tools/check_safetensors.py ";
  save_safetensors(dir.file("anvil.safetensors"), canonical(), kMeta);
  int status = test::run_status(tool + "check " + dir.file("anvil.safetensors"));
  if (test::is_skip_status(status)) GTEST_SKIP() << "python3 with torch and safetensors not found";
  EXPECT_EQ(status, 0) << "the reference library rejected or misread a file anvil wrote";
  ASSERT_EQ(test::run_status(tool + "write " + dir.file("python.safetensors")), 0);
  SafetensorsFile f(dir.file("python.safetensors"));
  EXPECT_EQ(f.metadata(), kMeta);
  expect_canonical(f);
}

// The committed model fixtures: their checkpoints open, and every parameter has its reference gradient.
TEST(Safetensors, ModelFixturesHaveAGradientPerParameter) {
  for (const char* name : {"llama_tiny", "llama_tiny_tied", "mamba_tiny"}) {
    const std::string dir = std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures/" + name;
    SafetensorsIndex model = open_checkpoint(dir);
    SafetensorsFile ref(dir + "/reference.safetensors");
    size_t grads = 0;
    for (const std::string& n : ref.names()) grads += n.rfind("grad.", 0) == 0;
    EXPECT_EQ(grads, model.names().size()) << name;
    for (const std::string& n : model.names()) {
      ASSERT_TRUE(ref.contains("grad." + n)) << name << ": " << n;
      EXPECT_EQ(ref.entry("grad." + n).shape, model.entry(n).shape) << n;
      EXPECT_EQ(model.entry(n).dtype, DType::f32) << n;
    }
    EXPECT_EQ(ref.entry("batch.loss").shape, Shape{}) << name;
    EXPECT_EQ(ref.entry("prompt.0.greedy").shape, Shape{64}) << name;
    EXPECT_EQ(ref.entry("prompt.2.logits").shape, (Shape{1, 11, 256})) << name;
  }
}
