// Single-sequence generation: prefill the prompt in one step, then decode one token per step until a stop
// condition, streaming the text as it becomes complete.
//
// Vocabulary: B batch (1 here), T prompt length, V vocabulary.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "serve/sampler.h"

namespace anvil {

struct GenerationConfig {
  int max_new_tokens = 128;
  bool stop_at_eos = true;                // the model's info().eos_id ends the generation
  std::vector<int32_t> stop_ids;          // more ids that end it (chat end-of-turn tokens, ...)
  std::vector<std::string> stop_strings;  // text that ends it; the text before the match is kept
  SamplingParams sampling;
  uint64_t seed = 0;
  bool echo = false;                      // stream the prompt's text before the generated text
  bool repetition_includes_prompt = true; // the repetition penalty also looks at the prompt's ids
  // Cache capacity: 0 = the model's context (info().max_len); smaller saves KV-cache memory.
  int64_t context = 0;
  // Every token through the host sampler with the whole logits row copied back, as before the device paths
  // (greedy picks, top-k candidates): the same tokens, for timing the two against each other.
  bool sample_on_host = false;
};

// Incremental detokenizer: push() returns the text that became complete with one more id (UTF-8 characters
// split across tokens are held back); flush() returns what is held. In the CLI it wraps the tokenizer's
// StreamDecoder; tests pass a fake.
struct Detokenizer {
  std::function<std::string(int32_t id)> push;
  std::function<std::string()> flush;
};

// Receives text as it is produced; never called with empty text. The concatenation of every call equals
// (echo ? prompt text : "") + GenerationResult::text.
using TextCallback = std::function<void(std::string_view text)>;

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;        // sampled tokens, the stop token included
  double prefill_ms = 0;         // the prompt's step call + the first logits on the host
  // The one-token steps (new_tokens - 1 of them). Greedy without a repetition penalty picks on the device and,
  // on a GPU, runs a step ahead: decode_ms is then the wall time from the first token to the last, with the
  // host's work overlapped; otherwise the steps' time alone.
  double decode_ms = 0;
  double sample_ms = 0;          // host sampling + detokenizing, all steps
  double decode_ms_per_token() const { return new_tokens > 1 ? decode_ms / double(new_tokens - 1) : 0; }
  double decode_tokens_per_s() const { return decode_ms > 0 ? 1e3 * double(new_tokens - 1) / decode_ms : 0; }
  double prefill_tokens_per_s() const { return prefill_ms > 0 ? 1e3 * double(prompt_tokens) / prefill_ms : 0; }
};

// Why generation ended.
enum class StopReason { eos, stop_id, stop_string, max_tokens, context };
const char* stop_reason_name(StopReason r);

struct GenerationResult {
  std::vector<int32_t> ids;  // the sampled ids (the prompt excluded; a stop id, if any, last)
  std::string text;          // their text, without the stop token and without a matched stop string
  StopReason stop = StopReason::max_tokens;
  GenerationStats stats;
};

// Throws anvil::Error "prompt of N tokens exceeds the context of M" when the prompt does not fit the model's
// context; the generation also ends (StopReason::context) when the context fills up.
GenerationResult generate(CausalLM& model, const Detokenizer& detok, const std::vector<int32_t>& prompt,
                          const GenerationConfig& config, const TextCallback& on_text = {});

// Holds back text that may be the start of a stop string, so streamed text never contains a stop string.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);
  // Adds text; returns what can be released now. Sets matched() once a stop string appears (the text
  // before it is released, everything after it dropped).
  std::string push(std::string_view text);
  std::string finish();  // the held-back text (no stop string can complete any more)
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool matched_ = false;
};

}  // namespace anvil
