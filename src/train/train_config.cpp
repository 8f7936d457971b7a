#include "train/train_config.h"

#include <map>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "backends/backend.h"
#include "core/error.h"
#include "train/fs_util.h"

namespace anvil {

namespace {

constexpr const char* kOp = "train config";
const std::set<std::string> kSections = {"model", "data", "optim"};

std::string describe(const toml::node& n) {
  std::ostringstream s;
  n.visit([&](auto& v) { s << v; });
  return s.str();
}

// Reads typed values by dotted key, remembering which keys the recipe may hold and where each value came from.
class Reader {
 public:
  Reader(toml::table& root, std::string source, std::map<std::string, std::string> set_args)
      : root_(root), source_(std::move(source)), set_args_(std::move(set_args)) {}

  std::string where(const std::string& key) const {
    auto it = set_args_.find(key);
    if (it != set_args_.end()) return str("--set ", it->second);
    const toml::node* n = root_.at_path(key).node();
    if (n && n->source().begin.line) return str(source_, ":", n->source().begin.line);
    return source_;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected, const std::string& got) const {
    ANVIL_THROW(kOp, str(key, " ", expected), str(got, " (", where(key), ")"));
  }
  void check(bool ok, const std::string& key, const std::string& expected, const std::string& got) const {
    if (!ok) fail(key, expected, got);
  }
  bool has(const std::string& key) const { return root_.at_path(key).node() != nullptr; }

  const toml::node* find(const std::string& key) {
    known_.insert(key);
    return root_.at_path(key).node();
  }
  void integer(const std::string& key, int64_t& out) {
    if (auto* n = find(key)) {
      if (!n->is_integer()) fail(key, "to be an integer", describe(*n));
      out = n->as_integer()->get();
    }
  }
  void number(const std::string& key, double& out) {
    if (auto* n = find(key)) {
      if (n->is_integer()) out = double(n->as_integer()->get());
      else if (n->is_floating_point()) out = n->as_floating_point()->get();
      else fail(key, "to be a number", describe(*n));
    }
  }
  void string(const std::string& key, std::string& out) {
    if (auto* n = find(key)) {
      if (!n->is_string()) fail(key, "to be a string", describe(*n));
      out = n->as_string()->get();
    }
  }
  void boolean(const std::string& key, bool& out) {
    if (auto* n = find(key)) {
      if (!n->is_boolean()) fail(key, "to be true or false", describe(*n));
      out = n->as_boolean()->get();
    }
  }
  void pair(const std::string& key, double& a, double& b) {
    if (auto* n = find(key)) {
      const toml::array* arr = n->as_array();
      if (!arr || arr->size() != 2 || !(*arr)[0].is_number() || !(*arr)[1].is_number())
        fail(key, "to be an array of two numbers", describe(*n));
      a = (*arr)[0].value<double>().value();
      b = (*arr)[1].value<double>().value();
    }
  }
  const toml::table* table(const std::string& key) {
    auto* n = find(key);
    if (n && !n->is_table()) fail(key, "to be a table", describe(*n));
    return n ? n->as_table() : nullptr;
  }

  // Every key present must be one that was read.
  void check_unknown(const toml::table& t, const std::string& prefix) const {
    for (auto&& [k, v] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (prefix.empty() && kSections.count(key)) {
        check(v.is_table(), key, str("to be a table ([", key, "])"), describe(v));
        check_unknown(*v.as_table(), key);
        continue;
      }
      if (known_.count(key)) continue;
      std::string options;
      for (auto& kk : known_) {
        bool same = prefix.empty() ? kk.find('.') == std::string::npos : kk.rfind(prefix + ".", 0) == 0;
        if (same) options += (options.empty() ? "" : ", ") + kk;
      }
      fail(key, "to be a known key", str("an unknown key (known here: ", options, ")"));
    }
  }

 private:
  toml::table& root_;
  std::string source_;
  std::map<std::string, std::string> set_args_;
  std::set<std::string> known_;
};

// Applies one "a.b.c=value" override to the table.
void apply_override(toml::table& root, const std::string& arg, std::map<std::string, std::string>& set_args) {
  size_t eq = arg.find('=');
  ANVIL_CHECK(eq != std::string::npos && eq > 0, kOp, "--set KEY=VALUE", str("'", arg, "'"));
  std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", value}};  // not TOML: a bare string
  }
  toml::table* t = &root;
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    std::string part = key.substr(start, dot - start);
    toml::node* n = t->get(part);
    if (!n) n = &t->insert(part, toml::table{}).first->second;
    ANVIL_CHECK(n->is_table(), kOp, str("'", key.substr(0, dot), "' to be a table"), str("a value (--set ", arg, ")"));
    t = n->as_table();
  }
  std::string last = key.substr(start);
  parsed.get("v")->visit([&](auto& v) { t->insert_or_assign(last, v); });
  set_args[key] = arg;
}

TrainConfig read_config(toml::table& root, const std::string& source, std::map<std::string, std::string> set_args) {
  Reader r(root, source, std::move(set_args));
  TrainConfig c;
  c.source = source;
  r.string("model.arch", c.model.arch);
  r.string("model.config", c.model.config_path);
  r.string("model.preset", c.model.preset);
  r.string("model.init", c.model_init);
  if (const toml::table* hf = r.table("model.hf_config")) {
    std::ostringstream s;
    s << toml::json_formatter{*hf};
    c.model.overrides = nlohmann::json::parse(s.str());
  }
  r.string("data.dir", c.data.dir);
  r.integer("data.seq_len", c.data.seq_len);
  r.integer("data.batch", c.data.batch);
  r.integer("data.micro_batches", c.data.micro_batches);
  r.boolean("data.shuffle", c.data.shuffle);
  OptimConfig& o = c.optim;
  r.number("optim.lr", o.lr);
  r.pair("optim.betas", o.beta1, o.beta2);
  r.number("optim.eps", o.eps);
  r.number("optim.weight_decay", o.weight_decay);
  r.number("optim.grad_clip", o.grad_clip);
  r.string("optim.schedule", o.schedule);
  r.integer("optim.warmup_steps", o.warmup_steps);
  r.number("optim.decay_fraction", o.decay_fraction);
  r.number("optim.min_lr_ratio", o.min_lr_ratio);
  r.integer("steps", c.steps);
  r.integer("eval_every", c.eval_every);
  r.integer("eval_batches", c.eval_batches);
  r.integer("log_every", c.log_every);
  r.integer("save_every", c.save_every);
  r.integer("keep_checkpoints", c.keep_checkpoints);
  r.string("out_dir", c.out_dir);
  int64_t seed = 0;
  r.integer("seed", seed);
  r.string("device", c.device);
  r.string("dtype", c.dtype);
  r.boolean("recompute", c.recompute);
  r.integer("keep_layers", c.keep_layers);
  r.number("peak_tflops", c.peak_tflops);
  r.check_unknown(root, "");

  // Values. Required keys first, so a missing one is named rather than reported as "0 is not > 0".
  for (const char* k : {"data.dir", "data.seq_len", "data.batch", "optim.lr", "steps", "out_dir"})
    r.check(r.has(k), k, "to be set", "nothing");
  if (!c.model_init.empty()) {
    for (const char* k : {"model.arch", "model.config", "model.preset", "model.hf_config"})
      r.check(!r.has(k), k, "to be absent with model.init (the checkpoint's config.json decides)", "a value");
  } else {
    r.check(r.has("model.arch"), "model.arch", "to be set (or model.init)", "nothing");
    r.check(c.model.arch == "llama" || c.model.arch == "mamba", "model.arch", "\"llama\" or \"mamba\"",
            str("\"", c.model.arch, "\""));
    r.check(!(r.has("model.config") && r.has("model.preset")), "model.preset", "not to be set with model.config",
            "both");
    r.check(r.has("model.config") || r.has("model.preset") || r.has("model.hf_config"), "model.config",
            "a config.json path, a preset or a [model.hf_config] table", "none of them");
  }
  r.check(!c.data.dir.empty(), "data.dir", "a directory", "\"\"");
  r.check(c.data.seq_len > 0, "data.seq_len", "> 0", str(c.data.seq_len));
  r.check(c.data.batch > 0, "data.batch", "> 0", str(c.data.batch));
  r.check(c.data.micro_batches >= 1, "data.micro_batches", ">= 1", str(c.data.micro_batches));
  r.check(o.lr > 0 && std::isfinite(o.lr), "optim.lr", "> 0", str(o.lr));
  r.check(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "optim.betas", "in [0, 1)",
          str("[", o.beta1, ", ", o.beta2, "]"));
  r.check(o.eps > 0, "optim.eps", "> 0", str(o.eps));
  r.check(o.weight_decay >= 0, "optim.weight_decay", ">= 0", str(o.weight_decay));
  r.check(o.grad_clip >= 0, "optim.grad_clip", ">= 0 (0: no clipping)", str(o.grad_clip));
  r.check(o.schedule == "cosine" || o.schedule == "wsd", "optim.schedule", "\"cosine\" or \"wsd\"",
          str("\"", o.schedule, "\""));
  r.check(c.steps > 0, "steps", "> 0", str(c.steps));
  r.check(o.warmup_steps >= 0 && o.warmup_steps <= c.steps, "optim.warmup_steps", str("in [0, steps = ", c.steps, "]"),
          str(o.warmup_steps));
  r.check(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "optim.min_lr_ratio", "in [0, 1]", str(o.min_lr_ratio));
  r.check(o.decay_fraction > 0 && o.decay_fraction <= 1, "optim.decay_fraction", "in (0, 1]", str(o.decay_fraction));
  if (o.schedule == "wsd") {
    int64_t d = c.schedule().decay_steps();
    r.check(o.warmup_steps + d <= c.steps, "optim.decay_fraction",
            str("to leave room for warmup: warmup_steps + decay steps <= steps = ", c.steps),
            str(o.warmup_steps, " + ", d));
  }
  r.check(c.eval_every >= 0, "eval_every", ">= 0 (0: only at the end)", str(c.eval_every));
  r.check(c.eval_batches >= 1, "eval_batches", ">= 1", str(c.eval_batches));
  r.check(c.log_every >= 1, "log_every", ">= 1", str(c.log_every));
  r.check(c.save_every >= 0, "save_every", ">= 0 (0: only at the end)", str(c.save_every));
  r.check(c.keep_checkpoints >= 1, "keep_checkpoints", ">= 1", str(c.keep_checkpoints));
  r.check(!c.out_dir.empty(), "out_dir", "a directory", "\"\"");
  r.check(seed >= 0, "seed", ">= 0", str(seed));
  c.seed = uint64_t(seed);
  Device dev;
  try {
    dev = parse_device(c.device);
  } catch (const Error&) {
    r.fail("device", "\"cpu\", \"gpu\" or \"gpu:N\"", str("\"", c.device, "\""));
  }
  r.check(c.dtype == "f32" || c.dtype == "bf16", "dtype", "\"f32\" or \"bf16\"", str("\"", c.dtype, "\""));
  r.check(c.dtype == "f32" || dev.is_gpu(), "dtype", "\"f32\" on device \"cpu\" (bf16 compute is GPU-only)",
          str("\"", c.dtype, "\""));
  r.check(c.keep_layers >= 0, "keep_layers", ">= 0 (the last layers that keep their activations with recompute)",
          str(c.keep_layers));
  r.check(c.peak_tflops >= 0, "peak_tflops", ">= 0", str(c.peak_tflops));
  c.schedule().validate();
  return c;
}

}  // namespace

LrSchedule TrainConfig::schedule() const {
  LrSchedule s;
  s.kind = optim.schedule;
  s.peak = optim.lr;
  s.steps = steps;
  s.warmup = optim.warmup_steps;
  s.decay_fraction = optim.decay_fraction;
  s.min_ratio = optim.min_lr_ratio;
  return s;
}

TrainConfig parse_train_config(std::string_view text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    ANVIL_THROW(kOp, "valid TOML", str(e.description(), " (", source, ":", e.source().begin.line, ":",
                                      e.source().begin.column, ")"));
  }
  std::map<std::string, std::string> set_args;
  for (auto& o : overrides) apply_override(root, o, set_args);
  return read_config(root, source, std::move(set_args));
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_train_config(read_file_bytes(path), path, overrides);
}

nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json model = {{"arch", c.model.arch}, {"config", c.model.config_path}, {"preset", c.model.preset},
                          {"init", c.model_init}, {"hf_config", c.model.overrides}};
  const OptimConfig& o = c.optim;
  return {{"model", model},
          {"data", {{"dir", c.data.dir}, {"seq_len", c.data.seq_len}, {"batch", c.data.batch},
                    {"micro_batches", c.data.micro_batches}, {"shuffle", c.data.shuffle}}},
          {"optim", {{"lr", o.lr}, {"betas", {o.beta1, o.beta2}}, {"eps", o.eps}, {"weight_decay", o.weight_decay},
                     {"grad_clip", o.grad_clip}, {"schedule", o.schedule}, {"warmup_steps", o.warmup_steps},
                     {"decay_fraction", o.decay_fraction}, {"min_lr_ratio", o.min_lr_ratio}}},
          {"steps", c.steps}, {"eval_every", c.eval_every}, {"eval_batches", c.eval_batches},
          {"log_every", c.log_every}, {"save_every", c.save_every}, {"keep_checkpoints", c.keep_checkpoints},
          {"out_dir", c.out_dir}, {"seed", c.seed}, {"device", c.device}, {"dtype", c.dtype},
          {"recompute", c.recompute}, {"keep_layers", c.keep_layers}, {"peak_tflops", c.peak_tflops},
          {"source", c.source}};
}

}  // namespace anvil
