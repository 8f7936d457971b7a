#include "train/prepare.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "train/dataset.h"
#include "train/fs_util.h"
#include "train/progress.h"
#include "train/token_shard.h"

namespace anvil {

namespace fs = std::filesystem;

namespace {

// Accumulates one split's tokens and writes a shard whenever a document ends past shard_tokens.
class SplitWriter {
 public:
  SplitWriter(std::string dir, std::string split, const TokenizerRef& tok, int64_t shard_tokens)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens) {
    info_.tokenizer_id = tok.id;
    info_.vocab_size = tok.vocab_size;
    info_.eos_id = tok.eos_id;
  }
  void add(const std::vector<int32_t>& doc) {
    buf_.insert(buf_.end(), doc.begin(), doc.end());
    info_.n_docs++;
    meta_.docs++;
    meta_.tokens += int64_t(doc.size());
    if (int64_t(buf_.size()) >= shard_tokens_) flush();
  }
  void flush() {
    if (buf_.empty()) return;
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05zu.tok", split_.c_str(), meta_.shards.size());
    write_shard((fs::path(dir_) / name).string(), buf_, info_);
    meta_.shards.push_back(name);
    buf_.clear();
    info_.n_docs = 0;
  }
  const SplitMeta& meta() const { return meta_; }

 private:
  std::string dir_, split_;
  int64_t shard_tokens_;
  ShardInfo info_;
  SplitMeta meta_;
  std::vector<int32_t> buf_;
};

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, int64_t* duplicates) {
  std::vector<std::string> files;
  std::set<fs::path> seen;
  auto add = [&](const fs::path& p) {
    if (seen.insert(fs::canonical(p)).second) files.push_back(p.string());
    else (*duplicates)++;
  };
  for (auto& in : inputs) {
    ANVIL_CHECK(fs::exists(in), "prepare", "existing input files or directories", str("no '", in, "'"));
    if (fs::is_directory(in)) {
      std::vector<fs::path> sub;
      for (auto& e : fs::recursive_directory_iterator(in))
        if (e.is_regular_file()) sub.push_back(e.path());
      std::sort(sub.begin(), sub.end());
      for (auto& p : sub) add(p);
    } else {
      add(in);
    }
  }
  ANVIL_CHECK(!files.empty(), "prepare", "at least one input file", "none");
  return files;
}

}  // namespace

PrepareStats prepare_dataset(const PrepareOptions& opt, const TokenizerRef& tok) {
  validate(opt.docs);
  ANVIL_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "prepare", "--val-fraction in [0, 1)", opt.val_fraction);
  ANVIL_CHECK(opt.shard_tokens > 0, "prepare", "shard_tokens > 0", opt.shard_tokens);
  ANVIL_CHECK(tok.encode && tok.vocab_size > 0 && tok.eos_id >= 0 && uint32_t(tok.eos_id) < tok.vocab_size, "prepare",
              "a tokenizer with an EOS token", str("vocab_size ", tok.vocab_size, ", eos_id ", tok.eos_id));
  auto t0 = std::chrono::steady_clock::now();
  PrepareStats st;
  std::vector<std::string> files = expand_inputs(opt.inputs, &st.skipped_files);
  for (auto& f : files) st.bytes += fs::file_size(f);

  fs::create_directories(opt.out_dir);
  fs::path meta_path = fs::path(opt.out_dir) / "meta.json";
  fs::remove(meta_path);  // until the new one is written, the directory is not a usable dataset

  SplitWriter train(opt.out_dir, "train", tok, opt.shard_tokens), val(opt.out_dir, "val", tok, opt.shard_tokens);
  ProgressBar bar("prepare", st.bytes, opt.progress);
  int64_t doc_index = 0, tokens = 0;
  uint64_t bytes_before = 0, bytes_now = 0;

  // Documents wait in a batch of ~8 MB of text, then are encoded in parallel and written in order.
  std::vector<std::string> pending, binary;
  size_t pending_bytes = 0;
  auto encode_pending = [&]() {
    std::vector<std::vector<int32_t>> ids(pending.size());
    std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < int64_t(pending.size()); i++) {
      try {
        ids[size_t(i)] = tok.encode(pending[size_t(i)]);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    for (auto& d : ids) {
      d.push_back(tok.eos_id);
      bool to_val = opt.val_fraction > 0 && rng_uniform(opt.seed, uint64_t(doc_index)) < opt.val_fraction;
      (to_val ? val : train).add(d);
      doc_index++;
      tokens += int64_t(d.size());
    }
    pending.clear();
    pending_bytes = 0;
    bar.update(bytes_now, tokens);
  };

  for (auto& f : files) {
    bool text = for_each_document(f, opt.docs, [&](std::string&& doc, uint64_t read) {
      bytes_now = bytes_before + read;
      pending_bytes += doc.size();
      pending.push_back(std::move(doc));
      if (pending_bytes >= (size_t(8) << 20)) encode_pending();
      bar.update(bytes_now, tokens);
    });
    bytes_before += fs::file_size(f);
    bytes_now = bytes_before;
    if (text) st.files++;
    else binary.push_back(f);
  }
  encode_pending();
  train.flush();
  val.flush();
  bar.finish(bytes_now, tokens);
  st.skipped_files += int64_t(binary.size());
  if (opt.progress && !binary.empty()) {
    std::string names;
    for (size_t i = 0; i < binary.size() && i < 3; i++) names += (i ? ", " : "") + fs::path(binary[i]).filename().string();
    std::fprintf(stderr, "prepare: skipped %zu binary file%s (a NUL byte in the first 8 KiB): %s%s\n", binary.size(),
                 binary.size() > 1 ? "s" : "", names.c_str(), binary.size() > 3 ? ", ..." : "");
  }
  ANVIL_CHECK(train.meta().tokens > 0, "prepare", "at least one non-empty text document", "none in the inputs");

  // Shards of an earlier, larger preparation would otherwise linger next to the new ones.
  std::set<std::string> keep(train.meta().shards.begin(), train.meta().shards.end());
  keep.insert(val.meta().shards.begin(), val.meta().shards.end());
  for (auto& e : fs::directory_iterator(opt.out_dir)) {
    std::string n = e.path().filename().string();
    bool ours = e.path().extension() == ".tok" && (n.rfind("train-", 0) == 0 || n.rfind("val-", 0) == 0);
    if (ours && !keep.count(n)) fs::remove(e.path());
  }
  DatasetMeta meta;
  meta.tokenizer_id = tok.id;
  meta.vocab_size = tok.vocab_size;
  meta.eos_id = tok.eos_id;
  meta.splits["train"] = train.meta();
  meta.splits["val"] = val.meta();
  // The dataset carries its tokenizer, so checkpoints trained on it can carry it too (train/trainer.cpp).
  if (!tok.json_path.empty()) {
    fs::path dst = fs::path(opt.out_dir) / "tokenizer.json";
    if (!fs::exists(dst) || !fs::equivalent(tok.json_path, dst))
      write_file_atomic(dst.string(), read_file_bytes(tok.json_path));
  }
  write_dataset_meta(opt.out_dir, meta);

  st.train_docs = train.meta().docs;
  st.train_tokens = train.meta().tokens;
  st.val_docs = val.meta().docs;
  st.val_tokens = val.meta().tokens;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace anvil
