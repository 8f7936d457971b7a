// Writing a .safetensors file atomically: temp file, fsync, rename; the temp file never outlives a failure.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "io/safetensors.h"

namespace anvil {

namespace {

// Owns the temporary file until commit(): any exception on the way closes and unlinks it.
class TempFile {
 public:
  TempFile(std::string final_path, std::string op)
      : final_(std::move(final_path)), tmp_(str(final_, ".tmp.", ::getpid())), op_(std::move(op)) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = errno;
    ANVIL_CHECK(fd_ >= 0, op_, str("to create '", tmp_, "'"), std::strerror(err));
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  void write_all(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd_, c, n);
      int err = errno;
      if (w < 0 && err == EINTR) continue;
      ANVIL_CHECK(w > 0, op_, str("to write ", n, " more bytes to '", tmp_, "'"),
                  w < 0 ? std::strerror(err) : "a write of 0 bytes");
      c += w;
      n -= size_t(w);
    }
  }
  void commit() {
    int rc = ::fsync(fd_), err = errno;
    ANVIL_CHECK(rc == 0, op_, str("to fsync '", tmp_, "'"), std::strerror(err));
    rc = ::close(fd_);
    err = errno;
    fd_ = -1;
    ANVIL_CHECK(rc == 0, op_, str("to close '", tmp_, "'"), std::strerror(err));
    rc = ::rename(tmp_.c_str(), final_.c_str());
    err = errno;
    ANVIL_CHECK(rc == 0, op_, str("to rename '", tmp_, "' to '", final_, "'"), std::strerror(err));
    committed_ = true;
    // Make the rename itself durable. Best effort: some filesystems refuse fsync on directories, and the new
    // file is complete either way.
    std::string dir = std::filesystem::path(final_).parent_path().string();
    int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string final_, tmp_, op_;
  int fd_ = -1;
  bool committed_ = false;
};

// 16 MiB: device tensors stream to the file through this much host memory at a time.
constexpr size_t kStagingBytes = size_t(16) << 20;

void write_tensor(TempFile& f, const Tensor& t0, std::vector<char>& staging) {
  const Tensor t = t0.contiguous();
  const size_t n = t.nbytes();
  if (t.device().is_cpu()) return f.write_all(t.data_ptr(), n);
  Backend& b = backend(t.device());
  staging.resize(std::min(n, kStagingBytes));
  for (size_t off = 0; off < n; off += kStagingBytes) {
    size_t m = std::min(kStagingBytes, n - off);
    b.copy_to_host(staging.data(), static_cast<const char*>(t.data_ptr()) + off, m);
    f.write_all(staging.data(), m);
  }
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string op = str("save_safetensors '", path, "'");
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (auto& [k, v] : metadata) m[k] = v;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    ANVIL_CHECK(!name.empty() && name != "__metadata__", op, "tensor names other than '' and '__metadata__'",
                str("'", name, "'"));
    ANVIL_CHECK(seen.insert(name).second, op, "unique tensor names", str("'", name, "' twice"));
    ANVIL_CHECK(t.defined(), op, str("tensor '", name, "' to be defined"), "an undefined tensor");
    const uint64_t n = t.nbytes();
    h[name] = {{"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  const uint64_t hlen = header.size();

  TempFile f(path, op);
  f.write_all(&hlen, 8);
  f.write_all(header.data(), header.size());
  std::vector<char> staging;
  for (auto& [name, t] : tensors) write_tensor(f, t, staging);
  f.commit();
}

}  // namespace anvil
