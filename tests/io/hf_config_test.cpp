#include "io/hf_config.h"

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "io_test_util.h"

using namespace anvil;
using anvil::test::expect_error;
using anvil::test::TempDir;
using nlohmann::json;

namespace {

const std::string kFixtures = std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures/";

// A Llama 3.1-style config in transformers 4.x spelling.
json legacy_llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 131072,
    "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16",
    "some_future_key": {"ignored": true}})");
}

void expect_llama3_rope(const RopeConfig& r) {
  EXPECT_EQ(r.type, "llama3");
  EXPECT_EQ(r.theta, 500000.0);
  EXPECT_EQ(r.factor, 8.0);
  EXPECT_EQ(r.low_freq_factor, 1.0);
  EXPECT_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_max_position, 8192);
}

void expect_same(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope.type, b.rope.type);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.factor, b.rope.factor);
  EXPECT_EQ(a.rope.original_max_position, b.rope.original_max_position);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.initializer_range, b.initializer_range);
  EXPECT_EQ(a.dtype, b.dtype);
}

}  // namespace

TEST(HfConfig, ParsesTheCommittedLlamaFixture) {
  json j = read_hf_config(kFixtures + "llama_tiny");
  EXPECT_EQ(detect_architecture(j), Architecture::llama);
  LlamaConfig c = load_llama_config(kFixtures + "llama_tiny");  // transformers 5 spelling: rope_parameters
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 176);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  expect_llama3_rope(c.rope);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.pad_token_id, std::nullopt);
  EXPECT_EQ(c.dtype, DType::f32);
  EXPECT_TRUE(load_llama_config(kFixtures + "llama_tiny_tied/config.json").tie_word_embeddings);
}

TEST(HfConfig, ParsesTheCommittedMambaFixture) {
  MambaConfig c = load_mamba_config(kFixtures + "mamba_tiny");
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.state_size, 16);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.expand, 2);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.conv_kernel, 4);
  EXPECT_EQ(c.time_step_rank, 4);
  EXPECT_FALSE(c.use_bias);
  EXPECT_TRUE(c.use_conv_bias);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-5);
  EXPECT_TRUE(c.residual_in_fp32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{0});
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.dtype, DType::f32);
  expect_error([&] { load_llama_config(kFixtures + "mamba_tiny"); }, {"a LlamaForCausalLM config", "Mamba"});
}

TEST(HfConfig, BothRopeSpellingsAgree) {
  json legacy = legacy_llama();
  LlamaConfig a = parse_llama_config(legacy);  // rope_theta + rope_scaling with "type"
  expect_llama3_rope(a.rope);
  legacy["rope_scaling"].erase("type");
  legacy["rope_scaling"]["rope_type"] = "llama3";
  expect_llama3_rope(parse_llama_config(legacy).rope);

  json v5 = legacy_llama();  // transformers 5: everything inside rope_parameters
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                           {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192}};
  expect_same(parse_llama_config(v5), a);

  json plain = legacy_llama();
  plain["rope_scaling"] = nullptr;
  LlamaConfig p = parse_llama_config(plain);
  EXPECT_EQ(p.rope.type, "default");
  EXPECT_EQ(p.rope.theta, 500000.0);
  plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};  // rope_parameters wins
  EXPECT_EQ(parse_llama_config(plain).rope.theta, 10000.0);
  plain.erase("rope_theta");
  plain.erase("rope_parameters");
  EXPECT_EQ(parse_llama_config(plain).rope.theta, 10000.0) << "transformers' default theta";

  json yarn = legacy_llama();
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error([&] { parse_llama_config(yarn, "yarn/config.json"); }, {"yarn/config.json", "'yarn'", "llama3"});
  json partial = legacy_llama();
  partial["rope_scaling"].erase("low_freq_factor");
  expect_error([&] { parse_llama_config(partial, "p.json"); }, {"p.json", "rope_scaling.low_freq_factor"});
}

TEST(HfConfig, DefaultsAndTokenIdForms) {
  json j = legacy_llama();
  LlamaConfig c = parse_llama_config(j);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.dtype, DType::bf16) << "torch_dtype";
  EXPECT_EQ(c.head_dim, 16) << "hidden_size / num_attention_heads";
  j["dtype"] = "float16";
  EXPECT_EQ(parse_llama_config(j).dtype, DType::f16) << "dtype (transformers 5) wins over torch_dtype";
  j["head_dim"] = nullptr;
  j.erase("num_key_value_heads");
  j["eos_token_id"] = nullptr;
  j["bos_token_id"] = nullptr;
  c = parse_llama_config(j);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4) << "defaults to num_attention_heads";
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.bos_token_id, std::nullopt);
  j["head_dim"] = 32;  // explicit head_dim independent of hidden_size (as in some Llama variants)
  EXPECT_EQ(parse_llama_config(j).head_dim, 32);
}

TEST(HfConfig, MissingAndBadKeysAreNamedErrors) {
  json j = legacy_llama();
  j.erase("hidden_size");
  expect_error([&] { parse_llama_config(j, "ckpt/config.json"); }, {"ckpt/config.json", "'hidden_size'", "no such key"});
  j = legacy_llama();
  j["vocab_size"] = "256";
  expect_error([&] { parse_llama_config(j, "c.json"); }, {"c.json", "'vocab_size' to be an integer"});
  j = legacy_llama();
  j["num_key_value_heads"] = 3;
  expect_error([&] { parse_llama_config(j); }, {"divisible by num_key_value_heads"});
  j = legacy_llama();
  j["attention_bias"] = true;
  expect_error([&] { parse_llama_config(j); }, {"attention_bias", "unsupported"});
  j = legacy_llama();
  j["mlp_bias"] = true;
  expect_error([&] { parse_llama_config(j); }, {"mlp_bias", "unsupported"});
  j = legacy_llama();
  j["hidden_act"] = "gelu";
  expect_error([&] { parse_llama_config(j); }, {"hidden_act", "'gelu'"});
  j = legacy_llama();
  j["torch_dtype"] = "complex64";
  expect_error([&] { parse_llama_config(j, "d.json"); }, {"d.json", "'complex64'"});

  json m = json::parse(R"({"model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 2})");
  expect_error([&] { parse_mamba_config(m, "m.json"); }, {"m.json", "'vocab_size'"});
  m["vocab_size"] = 100;
  MambaConfig mc = parse_mamba_config(m);
  EXPECT_EQ(mc.time_step_rank, 4) << "absent = auto = ceil(64 / 16)";
  m["hidden_size"] = 65;
  m["time_step_rank"] = "auto";
  EXPECT_EQ(parse_mamba_config(m).time_step_rank, 5) << "ceil(65 / 16)";
  m["time_step_rank"] = 7;
  EXPECT_EQ(parse_mamba_config(m).time_step_rank, 7);
  m["time_step_rank"] = "big";
  expect_error([&] { parse_mamba_config(m); }, {"time_step_rank"});

  TempDir dir;
  expect_error([&] { read_hf_config(dir.path().string()); }, {"config.json", "cannot open"});
  test::write_bytes(dir.file("config.json"), "{\"a\": ");
  expect_error([&] { read_hf_config(dir.path().string()); }, {"config.json", "bad JSON"});
}

TEST(HfConfig, UnsupportedArchitectureIsAClearError) {
  expect_error([] { detect_architecture(json{{"architectures", {"GPT2LMHeadModel"}}}, "gpt2/config.json"); },
               {"gpt2/config.json", "expected architectures LlamaForCausalLM or MambaForCausalLM, got GPT2LMHeadModel"});
  expect_error([] { detect_architecture(json{{"model_type", "gpt2"}}); }, {"got gpt2"});
  expect_error([] { detect_architecture(json::object()); }, {"'architectures' or 'model_type'"});
  EXPECT_EQ(detect_architecture(json{{"model_type", "mamba"}}), Architecture::mamba);
  EXPECT_EQ(detect_architecture(json{{"architectures", {"MambaForCausalLM"}}, {"model_type", "llama"}}),
            Architecture::mamba)
      << "architectures decides";
}

TEST(HfConfig, WritersRoundTrip) {
  LlamaConfig l = parse_llama_config(legacy_llama());
  l.pad_token_id = 5;
  expect_same(parse_llama_config(to_json(l)), l);
  l.rope.type = "default";
  expect_same(parse_llama_config(to_json(l)), l);
  EXPECT_TRUE(to_json(l)["rope_scaling"].is_null());

  MambaConfig m = load_mamba_config(kFixtures + "mamba_tiny");
  TempDir dir;
  save_hf_config(dir.file("config.json"), to_json(m));
  EXPECT_EQ(dir.list(), std::vector<std::string>{"config.json"});
  MambaConfig b = load_mamba_config(dir.path().string());
  EXPECT_EQ(b.hidden_size, m.hidden_size);
  EXPECT_EQ(b.time_step_rank, m.time_step_rank);
  EXPECT_EQ(b.intermediate_size, m.intermediate_size);
  EXPECT_EQ(b.tie_word_embeddings, m.tie_word_embeddings);
  EXPECT_EQ(b.eos_token_ids, m.eos_token_ids);
  EXPECT_EQ(b.time_step_init_scheme, m.time_step_init_scheme);
}

// anvil writes config.json + model.safetensors; transformers loads them and reproduces the fixture's logits.
TEST(HfConfig, TransformersLoadsCheckpointsAnvilWrites) {
  TempDir tmp;
  std::string args;
  for (const char* name : {"llama_tiny", "mamba_tiny"}) {
    const std::string src = kFixtures + name, dir = tmp.file(name);
    std::filesystem::create_directories(dir);
    json cfg = detect_architecture(read_hf_config(src)) == Architecture::llama ? to_json(load_llama_config(src))
                                                                                : to_json(load_mamba_config(src));
    save_hf_config(dir + "/config.json", cfg);
    SafetensorsIndex ck = open_checkpoint(src);
    NamedTensors tensors;
    for (const std::string& n : ck.names()) tensors.emplace_back(n, ck.get(n));
    save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
    args += str(" ", dir, " ", src, "/reference.safetensors");
  }
  // One python process for both: importing transformers takes longer than the checks.
  int status = test::run_status(str("TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1 python3 ",
                                    ANVIL_SOURCE_DIR, "/tools/check_hf_checkpoint.py", args));
  if (test::is_skip_status(status)) GTEST_SKIP() << "python3 with torch, safetensors and transformers not found";
  EXPECT_EQ(status, 0) << "transformers did not load what anvil wrote, or computed other logits";
}
