// safetensors: the checkpoint format of Hugging Face models, read memory-mapped and written atomically.
//
// File layout (little-endian): u64 N | N bytes of JSON header | data section.
//   header: {"__metadata__": {str: str}, "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}, ...}
//   offsets are bytes relative to the start of the data section; [b, e) holds numel * dtype_size bytes, row-major.
//
// Reading never copies the file into the heap: a SafetensorsFile maps it (copy-on-write, so an in-place op on a
// loaded weight changes this process's pages, never the file) and get() returns a CPU Tensor that views the
// mapping and keeps it alive. Every malformed input — truncated file, bad JSON, unknown dtype, offsets past the
// end or overlapping — is an anvil::Error naming the file, the tensor and the problem.
//
// A checkpoint directory is either one model.safetensors or shards listed by model.safetensors.index.json
// ("weight_map": {tensor name: shard file}); open_checkpoint() hides the difference.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace anvil {

// One tensor's header entry. begin/end are byte offsets within the data section.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// The safetensors spelling of a dtype ("BF16", "F8_E4M3", ...); throws for dtypes the format cannot hold.
const char* safetensors_dtype_name(DType t);

struct MappedFile;  // the mmap; shared by the file object and every tensor it handed out

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates; throws anvil::Error

  const std::string& path() const { return path_; }
  // Tensor names in the order the header lists them.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;  // throws naming the file and tensor
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const;

  // A zero-copy CPU view of the tensor that keeps the mapping alive. A tensor whose offset is not a multiple
  // of its element size (legal in the format, produced by writers that do not sort by alignment) is copied
  // into an aligned buffer instead, so typed loads stay well-defined.
  Tensor get(const std::string& name) const;

 private:
  std::string path_;
  std::shared_ptr<MappedFile> map_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint: one file or a sharded set behind an index. Tensor lookups go to the right shard.
class SafetensorsIndex {
 public:
  // `path`: a directory (model.safetensors, else model.safetensors.index.json), an index .json file, or a
  // single .safetensors file.
  explicit SafetensorsIndex(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return names_; }  // single file: header order; index: sorted
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  Tensor get(const std::string& name) const;  // zero-copy CPU view (see SafetensorsFile::get)
  // Copy one tensor to `device` as `dtype` (see load_tensor below).
  Tensor load(const std::string& name, Device device, DType dtype) const;
  // The index's "metadata" object (e.g. total_size) for sharded checkpoints, the header's for a single file;
  // values that are not strings are kept as their JSON text.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<std::shared_ptr<SafetensorsFile>>& shards() const { return shards_; }

 private:
  const SafetensorsFile& shard_for(const std::string& name) const;
  std::string path_;
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, size_t> shard_of_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

SafetensorsIndex open_checkpoint(const std::string& path);

// Copy a host tensor (typically a mapped checkpoint tensor) into `dst` on any device, converting between
// float dtypes (bf16 -> f32, f32 -> bf16, f16, fp8, ...) on the way. Shapes must match; integer dtypes must
// match exactly. The host side never holds more than one bounded staging buffer (16 MiB), so loading a model
// costs no second host copy of it.
void load_into(Tensor& dst, const Tensor& src);
// load_into a fresh tensor. A CPU destination of the source's dtype returns the (zero-copy) source itself.
Tensor load_tensor(const Tensor& src, Device device, DType dtype);

// Write tensors (any device, any strides) in the given order with string metadata. The file appears
// atomically: bytes go to "<path>.tmp.<pid>", which is fsynced and renamed over `path`; on any failure
// (full disk, write error, bad argument) the temporary file is removed, `path` is untouched, and an
// anvil::Error is thrown. The header is padded with spaces to a multiple of 8 bytes, as the reference library
// does, so the data section starts 8-byte aligned; put wide dtypes first to keep every tensor aligned.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace anvil
