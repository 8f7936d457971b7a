// anvil generate: text from one prompt, streamed to stdout; timing to stderr.
#include <cstdio>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "io/tokenizer.h"

namespace anvil::cli {

namespace {

struct GenerateOptions {
  ModelOptions model;
  GenerationConfig gen;
  std::string prompt;
  std::string system;     // with --chat
  bool chat = false;      // wrap the prompt in the Llama 3 chat format as a user turn
  bool no_stream = false;
  bool quiet = false;     // no stats line
};

int run_generate(int argc, char** argv) {
  GenerateOptions o;
  o.gen.sampling = generate_default_sampling();
  CLI::App app{"Generate text from a prompt.", "anvil generate"};
  add_model_options(app, o.model);
  app.add_option("--prompt,-p", o.prompt, "the prompt text")->required();
  add_generation_options(app, o.gen);
  app.add_flag("--chat", o.chat, "format the prompt as a user turn of the Llama 3 chat template");
  app.add_option("--system", o.system, "system message (with --chat)");
  app.add_flag("--echo", o.gen.echo, "print the prompt before the generated text");
  app.add_flag("--no-stream", o.no_stream, "print the text once at the end instead of token by token");
  app.add_flag("--quiet,-q", o.quiet, "no timing line on stderr");
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  for (auto& s : o.gen.stop_strings) s = unescape(s);

  check_model_dir("generate", o.model.dir);
  Tokenizer tok = load_tokenizer("generate", o.model.dir);
  auto model = load_model_for(o.model);

  std::vector<int32_t> ids;
  if (o.chat) {
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", o.prompt});
    ids = tok.encode(tok.apply_chat_template_llama3(msgs, /*add_generation_prompt=*/true), false);
  } else {
    ids = tok.encode(o.prompt, /*add_special_tokens=*/true);
  }
  o.gen.stop_ids = chat_stop_ids(tok);

  StreamDecoder dec(tok, /*skip_special_tokens=*/true);
  std::string held;  // --no-stream: everything, printed at the end
  auto res = generate(*model, detokenizer(dec), ids, o.gen, [&](std::string_view text) {
    if (o.no_stream) {
      held += text;
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
  });
  held += "\n";
  std::fwrite(held.data(), 1, held.size(), stdout);
  std::fflush(stdout);
  if (!o.quiet) std::fprintf(stderr, "[%s]\n", stats_line(res).c_str());
  return 0;
}

Register reg({"generate", "generate text from a prompt (streams to stdout)", run_generate});

}  // namespace

}  // namespace anvil::cli
