// File-system helpers on POSIX calls. trit avoids std::filesystem: PyTorch wheels (LibTorch 2.5
// and later, pytorch/pytorch#133437) export a statically linked copy of libstdc++'s filesystem
// code that interposes on the system one, and its remove_all crashes (seen with LibTorch 2.11).
#pragma once

#include <cstdint>
#include <string>

namespace trit::fs {

bool exists(const std::string& path);
bool is_file(const std::string& path);  // a regular file (following links)
bool is_dir(const std::string& path);
// Size in bytes of a regular file; throws trit::Error naming the path otherwise.
int64_t file_size(const std::string& path);

// "a/b" from "a" and "b" (no doubled separator).
std::string join(const std::string& dir, const std::string& name);
// "dir/name.ext" -> "name"; "dir/name.ext" -> "dir" (or "." without a directory).
std::string stem(const std::string& path);
std::string parent(const std::string& path);

// mkdir -p; throws trit::Error naming the path and errno's text.
void make_dirs(const std::string& path);
// Removes a file if present (returns whether it existed).
bool remove_file(const std::string& path);
// rm -r; missing paths are fine.
void remove_tree(const std::string& path);
// Writes `bytes` to path.tmp, flushes it to disk, renames it over `path` and syncs the directory:
// readers see the old file or the new one, never a torn one.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Renames `from` over `to` and syncs the directory (the tail of write_file_atomic).
void replace_file(const std::string& from, const std::string& to);
// A new empty directory under $TMPDIR (or /tmp) named <prefix>-XXXXXX.
std::string make_temp_dir(const std::string& prefix);

}  // namespace trit::fs
