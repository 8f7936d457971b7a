// File helpers for everything the trainer writes: whole-file reads, atomic writes (temp name, fsync, rename)
// and fsync of directory entries. Every failure is an anvil::Error naming the path and the OS error.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace anvil {

std::string read_file_bytes(const std::string& path);

// Writes `bytes` to "<path>.tmp.<pid>", fsyncs it and renames it over `path`; on failure the temporary file
// is removed and `path` keeps its old contents.
void write_file_atomic(const std::string& path, std::string_view bytes);

// fwrite/fflush/fsync/fclose with errno checks; `path` is for messages.
void write_all(std::FILE* f, const void* data, size_t n, const std::string& path);
void close_synced(std::FILE* f, const std::string& path);

// fsync a directory (so a rename inside it is durable) or a file.
void fsync_path(const std::string& path);
// fsync every regular file under `dir`, then `dir` itself (files a model's save() wrote, for example).
void fsync_tree(const std::string& dir);

// A temporary-name suffix unique to this process: ".tmp.<pid>".
std::string tmp_suffix();

}  // namespace anvil
