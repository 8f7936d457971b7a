#include "train/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "train/checksum.h"
#include "train/fs_util.h"

namespace anvil {

static_assert(std::endian::native == std::endian::little, "token shards are read and written as little-endian");

namespace {

constexpr char kMagic[8] = {'A', 'N', 'V', 'I', 'L', 'T', 'O', 'K'};

template <class T> void put(unsigned char* h, int off, T v) { std::memcpy(h + off, &v, sizeof v); }
template <class T> T get(const unsigned char* h, int off) {
  T v;
  std::memcpy(&v, h + off, sizeof v);
  return v;
}

}  // namespace

void write_shard(const std::string& path, const std::vector<int32_t>& tokens, ShardInfo info) {
  ANVIL_CHECK(info.vocab_size > 0 && info.eos_id >= 0 && uint32_t(info.eos_id) < info.vocab_size, "write_shard",
              "vocab_size > 0 and 0 <= eos_id < vocab_size", str("vocab_size ", info.vocab_size, ", eos_id ", info.eos_id));
  info.token_bytes = shard_token_bytes(info.vocab_size);
  info.n_tokens = tokens.size();
  std::vector<unsigned char> payload(tokens.size() * info.token_bytes);
  for (size_t i = 0; i < tokens.size(); i++) {
    int32_t t = tokens[i];
    ANVIL_CHECK(t >= 0 && uint32_t(t) < info.vocab_size, "write_shard", str("token ids in [0, ", info.vocab_size, ")"),
                str(t, " at position ", i, " of '", path, "'"));
    if (info.token_bytes == 2) {
      uint16_t u = uint16_t(t);
      std::memcpy(&payload[2 * i], &u, 2);
    } else {
      std::memcpy(&payload[4 * i], &t, 4);
    }
  }
  info.payload_crc = crc32(payload.data(), payload.size());

  unsigned char h[kShardHeaderBytes] = {};
  std::memcpy(h, kMagic, 8);
  put<uint32_t>(h, 8, kShardVersion);
  put<uint32_t>(h, 12, info.token_bytes);
  put<uint64_t>(h, 16, info.tokenizer_id);
  put<uint64_t>(h, 24, info.n_tokens);
  put<uint64_t>(h, 32, info.n_docs);
  put<uint32_t>(h, 40, info.vocab_size);
  put<int32_t>(h, 44, info.eos_id);
  put<uint32_t>(h, 48, info.payload_crc);
  put<uint32_t>(h, 60, crc32(h, 60));

  std::string tmp = path + tmp_suffix();
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  ANVIL_CHECK(f, "write_shard", str("a writable file '", tmp, "'"), std::strerror(errno));
  try {
    write_all(f, h, sizeof h, tmp);
    write_all(f, payload.data(), payload.size(), tmp);
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
    ANVIL_THROW("write_shard", str("'", tmp, "' renamed to '", path, "'"), std::strerror(e));
  }
}

struct TokenShard::Map {
  void* addr = nullptr;
  size_t len = 0;
  ~Map() {
    if (addr) ::munmap(addr, len);
  }
};

TokenShard::TokenShard(const std::string& path) : path_(path), map_(std::make_shared<Map>()) {
  const char* op = "token shard";
  int fd = ::open(path.c_str(), O_RDONLY);
  ANVIL_CHECK(fd >= 0, op, "a readable file", str("'", path, "': ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    ANVIL_THROW(op, "a file that can be stat()ed", str("'", path, "': ", std::strerror(e)));
  }
  size_t size = size_t(st.st_size);
  if (size < size_t(kShardHeaderBytes)) {
    ::close(fd);
    ANVIL_THROW(op, str("at least the ", kShardHeaderBytes, "-byte header"),
                str(size, " bytes in '", path, "' (truncated or not a token shard)"));
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  ANVIL_CHECK(addr != MAP_FAILED, op, "a mappable file", str("'", path, "': ", std::strerror(e)));
  map_->addr = addr;
  map_->len = size;
  const auto* h = static_cast<const unsigned char*>(addr);

  ANVIL_CHECK(std::memcmp(h, kMagic, 8) == 0, op, "magic \"ANVILTOK\"",
              str("other bytes in '", path, "' (not a token shard; make one with `anvil prepare`)"));
  uint32_t version = get<uint32_t>(h, 8);
  ANVIL_CHECK(version == kShardVersion, op, str("version ", kShardVersion), str(version, " in '", path, "'"));
  uint32_t header_crc = get<uint32_t>(h, 60), want_header_crc = crc32(h, 60);
  ANVIL_CHECK(header_crc == want_header_crc, op, str("header crc32 ", want_header_crc),
              str(header_crc, " in '", path, "' (corrupted header)"));
  info_.token_bytes = get<uint32_t>(h, 12);
  info_.tokenizer_id = get<uint64_t>(h, 16);
  info_.n_tokens = get<uint64_t>(h, 24);
  info_.n_docs = get<uint64_t>(h, 32);
  info_.vocab_size = get<uint32_t>(h, 40);
  info_.eos_id = get<int32_t>(h, 44);
  info_.payload_crc = get<uint32_t>(h, 48);
  ANVIL_CHECK(info_.token_bytes == shard_token_bytes(info_.vocab_size), op,
              str("token_bytes ", shard_token_bytes(info_.vocab_size), " for vocab_size ", info_.vocab_size),
              str(info_.token_bytes, " in '", path, "'"));
  ANVIL_CHECK(info_.n_tokens <= (size - kShardHeaderBytes) / info_.token_bytes, op,
              str(kShardHeaderBytes + info_.n_tokens * info_.token_bytes, " bytes for ", info_.n_tokens, " tokens"),
              str(size, " bytes in '", path, "' (truncated)"));
  size_t want = kShardHeaderBytes + info_.n_tokens * info_.token_bytes;
  ANVIL_CHECK(size == want, op, str(want, " bytes for ", info_.n_tokens, " tokens"),
              str(size, " bytes in '", path, "' (trailing bytes)"));
  payload_ = h + kShardHeaderBytes;
  uint32_t crc = crc32(payload_, size - kShardHeaderBytes);
  ANVIL_CHECK(crc == info_.payload_crc, op, str("payload crc32 ", info_.payload_crc),
              str(crc, " in '", path, "' (corrupted data)"));
}

void TokenShard::read(int64_t start, int64_t n, int32_t* out) const {
  ANVIL_CHECK(start >= 0 && n >= 0 && start + n <= size(), "TokenShard::read", str("a range within [0, ", size(), ")"),
              str("[", start, ", ", start + n, ") of '", path_, "'"));
  if (info_.token_bytes == 2) {
    for (int64_t i = 0; i < n; i++) {
      uint16_t t;
      std::memcpy(&t, payload_ + 2 * (start + i), 2);
      out[i] = int32_t(t);
    }
  } else {
    std::memcpy(out, payload_ + 4 * start, size_t(n) * 4);
  }
}

}  // namespace anvil
