// Reading one .safetensors file: map it, validate every header field against the file, hand out views.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace anvil {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian data; so do we");

struct MappedFile {
  void* addr = nullptr;
  size_t size = 0;
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (addr) munmap(addr, size);
  }
  const char* bytes() const { return static_cast<const char*>(addr); }
};

// The reference library refuses headers above 100 MB; a Llama-405B index header is ~100 kB, so a larger value
// is a corrupt length field, and refusing it keeps us from parsing gigabytes of tensor data as JSON.
static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::e4m3fn: return "F8_E4M3";
    case DType::e5m2: return "F8_E5M2";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    default: break;
  }
  ANVIL_THROW("safetensors_dtype_name", "a dtype safetensors can store (f32 f16 bf16 e4m3fn e5m2 i32 i64 u8)",
              dtype_name(t));
}

static bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32}, {"F16", DType::f16},         {"BF16", DType::bf16}, {"F8_E4M3", DType::e4m3fn},
      {"F8_E5M2", DType::e5m2}, {"I32", DType::i32}, {"I64", DType::i64},   {"U8", DType::u8}};
  for (auto& [name, dt] : table)
    if (s == name) {
      *out = dt;
      return true;
    }
  return false;
}

static std::shared_ptr<MappedFile> map_file(const std::string& path, const std::string& op) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int err = errno;
  ANVIL_CHECK(fd >= 0, op, "a readable file", std::strerror(err));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    ANVIL_THROW(op, "a regular file", "a directory or special file");
  }
  auto m = std::make_shared<MappedFile>();
  m->size = size_t(st.st_size);
  if (m->size < 8) {
    ::close(fd);
    ANVIL_THROW(op, "at least 8 bytes (the header length)", str(m->size, " bytes: the file is truncated"));
  }
  // Private writable mapping: copy-on-write pages, so writes through a view never reach the file (and never
  // fault, as they would on a read-only mapping).
  void* a = mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  err = errno;
  ::close(fd);  // the mapping holds its own reference to the file
  ANVIL_CHECK(a != MAP_FAILED, op, "a file that can be memory-mapped", std::strerror(err));
  m->addr = a;
  return m;
}

static uint64_t checked_nbytes(const Shape& shape, DType dt, bool* overflow) {
  uint64_t n = dtype_size(dt);
  *overflow = false;
  for (int64_t d : shape) *overflow |= __builtin_mul_overflow(n, uint64_t(d), &n);
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string op = str("safetensors '", path, "'");
  map_ = map_file(path, op);
  const uint64_t size = map_->size;
  uint64_t n;
  std::memcpy(&n, map_->bytes(), 8);
  ANVIL_CHECK(n <= kMaxHeaderBytes, op, str("a header length of at most ", kMaxHeaderBytes, " bytes"),
              str(n, " bytes: the header is too long (corrupt length field?)"));
  ANVIL_CHECK(n <= size - 8, op, str("a header length within the ", size - 8, " bytes after the length field"),
              str(n, " bytes: the file is truncated"));
  ANVIL_CHECK(n >= 1 && map_->bytes()[8] == '{', op, "a JSON object header starting with '{'",
              n ? str("a header starting with byte ", int(static_cast<unsigned char>(map_->bytes()[8])))
                : std::string("an empty header"));
  const uint64_t data_start = 8 + n, data_size = size - data_start;

  nlohmann::ordered_json h;
  try {
    h = nlohmann::ordered_json::parse(map_->bytes() + 8, map_->bytes() + data_start);
  } catch (const nlohmann::json::exception& e) {
    ANVIL_THROW(op, "a valid JSON header", str("bad JSON: ", e.what()));
  }
  ANVIL_CHECK(h.is_object(), op, "a JSON object header", h.type_name());

  for (auto& [key, val] : h.items()) {
    if (key == "__metadata__") {
      ANVIL_CHECK(val.is_object(), op, "__metadata__ to be an object of strings", val.type_name());
      for (auto& [mk, mv] : val.items()) {
        ANVIL_CHECK(mv.is_string(), op, str("__metadata__ value '", mk, "' to be a string"), mv.dump());
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string what = str("tensor '", key, "'");
    ANVIL_CHECK(val.is_object(), op, what + " to be an object with dtype, shape, data_offsets", val.dump());
    SafetensorsEntry e;
    e.name = key;
    auto dt = val.find("dtype");
    ANVIL_CHECK(dt != val.end() && dt->is_string(), op, what + " to have a string 'dtype'", val.dump());
    ANVIL_CHECK(parse_dtype(dt->get<std::string>(), &e.dtype), op,
                what + " with dtype F32, F16, BF16, F8_E4M3, F8_E5M2, I32, I64 or U8",
                str("unsupported dtype '", dt->get<std::string>(), "'"));
    auto sh = val.find("shape");
    ANVIL_CHECK(sh != val.end() && sh->is_array(), op, what + " to have a 'shape' array", val.dump());
    for (auto& d : *sh) {
      ANVIL_CHECK(d.is_number_unsigned(), op, what + " with non-negative integer shape sizes", sh->dump());
      ANVIL_CHECK(d.get<uint64_t>() <= uint64_t(INT64_MAX), op, what + " with a representable shape", sh->dump());
      e.shape.push_back(int64_t(d.get<uint64_t>()));
    }
    auto off = val.find("data_offsets");
    ANVIL_CHECK(off != val.end() && off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() &&
                    (*off)[1].is_number_unsigned(),
                op, what + " to have 'data_offsets' [begin, end] of non-negative integers", val.dump());
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    ANVIL_CHECK(e.begin <= e.end, op, what + " with data_offsets begin <= end", off->dump());
    ANVIL_CHECK(e.end <= data_size, op, str(what, " with data_offsets within the ", data_size, "-byte data section"),
                str(off->dump(), ": offsets beyond the file size (truncated file?)"));
    bool overflow;
    uint64_t nbytes = checked_nbytes(e.shape, e.dtype, &overflow);
    ANVIL_CHECK(!overflow && nbytes == e.end - e.begin, op,
                str(what, " of ", dtype_name(e.dtype), shape_str(e.shape), " to span ",
                    overflow ? std::string("a representable size") : str(nbytes, " bytes")),
                str(e.end - e.begin, " bytes in data_offsets ", off->dump()));
    ANVIL_CHECK(entries_.count(key) == 0, op, "unique tensor names", str("'", key, "' twice"));
    names_.push_back(key);
    entries_.emplace(key, std::move(e));
  }

  // Non-overlapping: sorted by begin, each non-empty tensor starts at or after the previous one's end.
  std::vector<const SafetensorsEntry*> order;
  for (auto& [k, e] : entries_)
    if (e.end > e.begin) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); i++) {
    const SafetensorsEntry &a = *order[i - 1], &b = *order[i];
    ANVIL_CHECK(b.begin >= a.end, op, "tensors with non-overlapping data_offsets",
                str("tensor '", b.name, "' [", b.begin, ",", b.end, ") overlapping tensor '", a.name, "' [", a.begin,
                    ",", a.end, ")"));
  }
}

uint64_t SafetensorsFile::file_size() const { return map_->size; }

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  ANVIL_CHECK(it != entries_.end(), str("safetensors '", path_, "'"), str("a tensor named '", name, "'"),
              str("no such tensor among ", names_.size()));
  return it->second;
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  uint64_t header;
  std::memcpy(&header, map_->bytes(), 8);
  char* p = static_cast<char*>(map_->addr) + 8 + header + e.begin;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) == 0)
    return Tensor::from_blob(p, e.shape, e.dtype, Device::cpu(), map_);
  Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
  std::memcpy(t.data_ptr(), p, e.end - e.begin);
  return t;
}

}  // namespace anvil
