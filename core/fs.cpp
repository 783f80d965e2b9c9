// POSIX file-system helpers: see fs.h.
#include "core/fs.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace trit::fs {
namespace {

void sync_path(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

bool is_file(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

int64_t file_size(const std::string& path) {
    struct stat st;
    TRIT_CHECK(::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode), path, ": not a regular file");
    return static_cast<int64_t>(st.st_size);
}

bool is_dir(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string stem(const std::string& path) {
    const auto slash = path.find_last_of('/');
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    const auto dot = base.find_last_of('.');
    return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

std::string parent(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

void make_dirs(const std::string& path) {
    TRIT_CHECK(!path.empty(), "cannot create a directory with an empty name");
    std::string prefix;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        prefix = path.substr(0, pos);
        if (prefix.empty() || is_dir(prefix)) continue;
        if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
            TRIT_FAIL("cannot create directory '", prefix, "': ", std::strerror(errno));
    }
    TRIT_CHECK(is_dir(path), "'", path, "' exists and is not a directory");
}

bool remove_file(const std::string& path) {
    return ::unlink(path.c_str()) == 0;
}

void remove_tree(const std::string& path) {
    if (!exists(path)) return;
    auto remove_entry = [](const char* p, const struct stat*, int, struct FTW*) -> int {
        return ::remove(p);
    };
    TRIT_CHECK(::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0,
               "cannot remove '", path, "': ", std::strerror(errno));
}

void replace_file(const std::string& from, const std::string& to) {
    TRIT_CHECK(std::rename(from.c_str(), to.c_str()) == 0, "cannot rename '", from, "' to '", to,
               "': ", std::strerror(errno));
    sync_path(parent(to), O_RDONLY | O_DIRECTORY);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    TRIT_CHECK(fd >= 0, "cannot write '", tmp, "': ", std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            TRIT_FAIL("cannot write '", tmp, "': ", std::strerror(err));
        }
        done += static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    replace_file(tmp, path);
}

std::string make_temp_dir(const std::string& prefix) {
    const char* env = std::getenv("TMPDIR");
    std::string templ = join(env && *env ? env : "/tmp", prefix + "-XXXXXX");
    TRIT_CHECK(::mkdtemp(templ.data()) != nullptr, "cannot create a temporary directory '", templ,
               "': ", std::strerror(errno));
    return templ;
}

}  // namespace trit::fs
