#include "train/fs_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace anvil {

namespace fs = std::filesystem;

std::string tmp_suffix() { return ".tmp." + std::to_string(::getpid()); }

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ANVIL_CHECK(in.good(), "read", "a readable file", str("'", path, "': ", std::strerror(errno)));
  std::ostringstream s;
  s << in.rdbuf();
  ANVIL_CHECK(!in.bad(), "read", "a readable file", str("'", path, "': read error"));
  return s.str();
}

void write_all(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n == 0) return;
  size_t w = std::fwrite(data, 1, n, f);
  ANVIL_CHECK(w == n, "write", str(n, " bytes written to '", path, "'"),
              str(w, " (", std::strerror(errno), ")"));
}

void close_synced(std::FILE* f, const std::string& path) {
  int e = 0;
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) e = errno;
  if (std::fclose(f) != 0 && e == 0) e = errno;
  ANVIL_CHECK(e == 0, "write", str("'", path, "' flushed to disk"), std::strerror(e));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  std::string tmp = path + tmp_suffix();
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  ANVIL_CHECK(f, "write", str("a writable file '", tmp, "'"), std::strerror(errno));
  try {
    write_all(f, bytes.data(), bytes.size(), tmp);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  try {
    close_synced(f, tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    ANVIL_THROW("write", str("'", tmp, "' renamed to '", path, "'"), std::strerror(e));
  }
  fs::path parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? std::string(".") : parent.string());
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  ANVIL_CHECK(fd >= 0, "fsync", str("an openable path '", path, "'"), std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the data is then as durable as they allow.
  ANVIL_CHECK(rc == 0 || e == EINVAL, "fsync", str("'", path, "' synced"), std::strerror(e));
}

void fsync_tree(const std::string& dir) {
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) fsync_path(e.path().string());
  fsync_path(dir);
}

}  // namespace anvil
