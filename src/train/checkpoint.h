// Checkpoint directories: out_dir/checkpoint-STEP/ holding the model (config.json + model.safetensors, from
// CausalLM::save), optimizer.safetensors and trainer_state.json; out_dir/latest names the newest one.
//
// Writing is all-or-nothing: everything goes into out_dir/.checkpoint-STEP.tmp.<pid>, which is fsynced and
// renamed into place; `latest` is replaced (atomically) only after that; older checkpoints are pruned last.
// A failure anywhere (full disk, write error, a throwing save()) removes the temporary directory and throws,
// leaving every earlier checkpoint and `latest` untouched.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace anvil {

std::string checkpoint_name(int64_t step);  // "checkpoint-120"

// write(tmp_dir) fills an empty temporary directory. Keeps the newest `keep` checkpoints (by step).
// Returns the final directory.
std::string save_checkpoint(const std::string& out_dir, int64_t step, int64_t keep,
                            const std::function<void(const std::string& tmp_dir)>& write);

// (step, directory) of every checkpoint-N directory in out_dir, by increasing step.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir);

// The directory `latest` names, or "" when there is none.
std::string latest_checkpoint(const std::string& out_dir);

// --resume: "auto" → latest_checkpoint(out_dir) ("" to start afresh); anything else must be a checkpoint
// directory (or an out_dir with a `latest` file).
std::string resolve_resume(const std::string& arg, const std::string& out_dir);

}  // namespace anvil
