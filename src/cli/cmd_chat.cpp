// anvil chat: an interactive conversation in the Llama 3 chat format. Reads one user message per line from
// stdin (a terminal or a pipe), streams each reply to stdout. The history is re-encoded and prefilled every
// turn (no cache reuse between turns yet); when it outgrows the context the oldest turns are dropped.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "io/tokenizer.h"
#include "serve/chat_history.h"

namespace anvil::cli {

namespace {

struct ChatOptions {
  ModelOptions model;
  GenerationConfig gen;
  std::string system;
  bool stats = false;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

int run_chat(int argc, char** argv) {
  ChatOptions o;
  o.gen.max_new_tokens = 512;
  o.gen.sampling.temperature = 0.7f;
  o.gen.sampling.top_k = 40;
  o.gen.sampling.top_p = 0.9f;
  CLI::App app{"Chat with a model (Llama 3 chat format). One message per line on stdin; /reset forgets the "
               "conversation, /exit (or end of input) quits.",
               "anvil chat"};
  add_model_options(app, o.model);
  add_generation_options(app, o.gen);
  app.add_option("--system", o.system, "system message, kept through /reset and history trimming");
  app.add_option("--context", o.gen.context, "context in tokens for history + reply (0 = the model's)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--stats", o.stats, "print timing after each reply (stderr)");
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  for (auto& s : o.gen.stop_strings) s = unescape(s);

  check_model_dir("chat", o.model.dir);
  Tokenizer tok = load_tokenizer("chat", o.model.dir);
  auto model = load_model_for(o.model);
  o.gen.stop_ids = chat_stop_ids(tok);
  const int64_t model_ctx = model->info().max_len > 0 ? model->info().max_len : INT64_MAX;
  const int64_t ctx = o.gen.context > 0 ? std::min(o.gen.context, model_ctx) : model_ctx;
  o.gen.context = ctx == INT64_MAX ? 0 : ctx;
  // The history may use what the reply does not: a full-length reply must still fit.
  const int64_t budget = ctx == INT64_MAX ? INT64_MAX : ctx - std::min<int64_t>(o.gen.max_new_tokens, ctx - 1);

  std::vector<ChatMessage> history;
  auto reset = [&] {
    history.clear();
    if (!o.system.empty()) history.push_back({"system", o.system});
  };
  reset();
  auto encode = [&](const std::vector<ChatMessage>& msgs) {
    return tok.encode(tok.apply_chat_template_llama3(msgs, /*add_generation_prompt=*/true), false);
  };
  const bool tty = isatty(STDIN_FILENO);
  uint64_t turn = 0;
  std::string line;
  for (;;) {
    if (tty) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    line = trim(line);
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      std::fputs("[conversation reset]\n", stderr);
      continue;
    }
    if (line[0] == '/') {
      std::fprintf(stderr, "[unknown command %s: /reset or /exit]\n", line.c_str());
      continue;
    }
    history.push_back({"user", line});
    const size_t before = history.size();
    if (!trim_chat_history(history, budget, [&](const auto& msgs) { return encode(msgs).size(); })) {
      std::fprintf(stderr, "[not sent: with this message the prompt has %zu tokens, over the %lld of the context "
                   "less %d for the reply]\n", encode(history).size(), (long long)ctx, o.gen.max_new_tokens);
      history.pop_back();
      continue;
    }
    if (history.size() < before)
      std::fprintf(stderr, "[dropped the %zu oldest messages to fit the context]\n", before - history.size());

    GenerationConfig g = o.gen;
    g.seed = o.gen.seed + turn++;  // a new draw each turn, still reproducible from --seed
    StreamDecoder dec(tok, /*skip_special_tokens=*/true);
    auto res = generate(*model, detokenizer(dec), encode(history), g, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::fputs("\n", stdout);
    std::fflush(stdout);
    history.push_back({"assistant", res.text});
    if (o.stats) std::fprintf(stderr, "[%s]\n", stats_line(res).c_str());
  }
  return 0;
}

Register reg({"chat", "chat with a model interactively (Llama 3 chat format; /reset, /exit)", run_chat});

}  // namespace

}  // namespace anvil::cli
