// anvil logits: full-sequence logits of a model for the token ids in a safetensors file, written to another —
// the bridge to parity scripts (tools/llama_bf16_parity.py), which compare them with transformers' logits.
//
// Input: every tensor named `<name>.input_ids` (i32 or i64, (B, T)); output: `<name>.logits` f32 (B, T, V).
#include <cstdio>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "io/safetensors.h"

namespace anvil::cli {

namespace {

int run_logits(int argc, char** argv) {
  ModelOptions mo;
  std::string ids_path, out_path;
  CLI::App app{"Write a model's logits for the token ids in a safetensors file.", "anvil logits"};
  add_model_options(app, mo);
  app.add_option("--ids", ids_path, "safetensors file with <name>.input_ids tensors (B, T) i32/i64")->required();
  app.add_option("--out", out_path, "safetensors file to write <name>.logits (B, T, V) f32 into")->required();
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;

  check_model_dir("logits", mo.dir);
  SafetensorsIndex in(ids_path);
  auto model = load_model_for(mo);
  const std::string suffix = ".input_ids";
  NamedTensors out;
  for (const std::string& name : in.names()) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    Tensor raw = in.get(name);
    ANVIL_CHECK(raw.dim() == 2 && (raw.dtype() == DType::i32 || raw.dtype() == DType::i64), "logits",
                str(name, " as (B, T) i32 or i64"), raw.describe());
    Tensor ids = Tensor::from_floats(raw.to_floats(), raw.shape(), DType::i32);  // ids < 2^24: exact in f32
    Tensor logits = model->logits(ids).to(Device::cpu());
    const std::string stem = name.substr(0, name.size() - suffix.size());
    std::fprintf(stderr, "%s: %s -> logits %s\n", stem.c_str(), raw.describe().c_str(), logits.describe().c_str());
    out.emplace_back(stem + ".logits", logits);
  }
  ANVIL_CHECK(!out.empty(), "logits", str("at least one <name>.input_ids tensor in ", ids_path), "none");
  save_safetensors(out_path, out);
  std::fprintf(stderr, "wrote %zu logits tensors to %s\n", out.size(), out_path.c_str());
  return 0;
}

Register reg({"logits", "write a model's logits for token ids (parity checks)", run_logits});

}  // namespace

}  // namespace anvil::cli
