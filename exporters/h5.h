// trit::h5: the HDF5 layer trit's model files are written and read through, as move-only handles.
// Every HDF5 failure and every missing, foreign, truncated or corrupt file is a trit::Error naming
// "<file>:<in-file path>" and what was expected vs found. Limits: whole datasets, one-level names.
//
// Format choices. Files are written in the HDF5 1.10 format, where all metadata trit writes is
// checksummed (readable by HDF5 >= 1.10 and h5py built on it). Datasets of >= kCompressMinBytes raw
// bytes are chunked (row blocks of about kChunkTargetBytes), deflated at kDeflateLevel and given a
// Fletcher-32 checksum per chunk, so a damaged chunk fails to read; smaller ones are contiguous,
// without checksum. String attributes are written as scalar fixed-length null-terminated UTF-8:
// kept inside the checksummed object header (variable-length ones live in the unchecksummed global
// heap, and HDF5 1.10 crashes on a damaged one); h5py reads them as str. Variable-length strings
// (h5py's default) are read too. Integer attributes are int64, float ones float64. fp16 and bf16
// are real HDF5 16-bit float types, passed in and out as uint16_t bit patterns (see half.h).
// A file is complete only after close() or destruction: write to a temporary name and rename.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace trit::h5 {

enum class DType { kU8, kI8, kI32, kI64, kF32, kF16, kBF16 };

// "uint8", "int8", "int32", "int64", "float32", "float16", "bfloat16".
const char* dtype_name(DType dtype);
// Bytes per element.
int64_t dtype_size(DType dtype);

// Datasets of at least this many raw bytes are compressed (chunked + deflate + Fletcher-32).
inline constexpr int64_t kCompressMinBytes = 64 * 1024;
inline constexpr int64_t kChunkTargetBytes = 1 << 20;
inline constexpr int kDeflateLevel = 4;

namespace detail {
// Owns one HDF5 id (hid_t is int64_t since HDF5 1.10) and closes it with `close` on destruction.
class Handle {
  public:
    using Closer = int (*)(int64_t);
    Handle() = default;
    Handle(int64_t id, Closer close) : id_(id), close_(close) {}
    Handle(Handle&& other) noexcept;
    Handle& operator=(Handle&& other) noexcept;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }

    int64_t get() const { return id_; }
    // Closes now; returns false where HDF5 reported a failure.
    bool reset();

  private:
    int64_t id_ = -1;
    Closer close_ = nullptr;
};
}  // namespace detail

struct DatasetInfo {
    DType dtype;
    std::vector<int64_t> shape;  // () for a scalar dataset
    int64_t bytes_on_disk;       // H5Dget_storage_size: compressed size, checksums included
};

class Group;

class File {
  public:
    // Creates (truncating) a file for writing.
    static File create(const std::string& path);
    // Opens read-only. Checks, in order: exists, is readable, is not empty, is not cut inside the
    // superblock, has the HDF5 signature, opens, opens the root group; the error says which
    // failed (missing / empty / truncated / not HDF5 / corrupt).
    static File open(const std::string& path);

    const std::string& path() const { return path_; }
    Group root() const;
    // Flushes everything to disk and closes, reporting a failure (the destructor cannot). Groups
    // still alive keep HDF5's file open until they die; close() still flushes.
    void close();

  private:
    File(detail::Handle id, std::string path) : id_(std::move(id)), path_(std::move(path)) {}
    detail::Handle id_;
    std::string path_;
};

class Group {
  public:
    // In-file path: "/" for the root, "/layers/fc1" below it.
    std::string path() const { return path_; }
    const std::string& file_path() const { return file_; }

    // Structure. `name` is one link name: not empty, no '/', not ".".
    Group create_group(const std::string& name);  // error if the name exists
    Group open_group(const std::string& name) const;
    std::vector<std::string> children() const;  // link names, sorted bytewise
    bool has(const std::string& name) const;    // a link of that name exists
    bool has_group(const std::string& name) const;
    bool has_dataset(const std::string& name) const;

    // Attributes of this group (scalars). set_attr replaces an existing attribute of that name.
    void set_attr(const std::string& name, const std::string& value);  // no NUL bytes
    void set_attr(const std::string& name, const char* value) {
        set_attr(name, std::string(value));
    }
    void set_attr(const std::string& name, int64_t value);
    void set_attr(const std::string& name, double value);
    // Any other integer type (int, size_t, ...) is stored as int64 (range-checked).
    template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                               !std::is_same_v<T, int64_t>,
                                           int> = 0>
    void set_attr(const std::string& name, T value) {
        if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
            check_int64_range(name, value <= static_cast<T>(INT64_MAX));
        }
        set_attr(name, static_cast<int64_t>(value));
    }
    std::string attr_string(const std::string& name) const;  // string, any cset, fixed or vlen
    int64_t attr_int(const std::string& name) const;         // any integer type that fits
    double attr_double(const std::string& name) const;       // any float type
    bool has_attr(const std::string& name) const;
    std::vector<std::string> attrs() const;  // attribute names, sorted bytewise

    // Datasets. `data` holds prod(shape) elements of dtype, row-major (f16/bf16 as uint16_t
    // bits); it may be null when that product is 0. Shape () is a scalar. Error if the name
    // exists.
    void write(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
               const void* data);
    // dtype and shape of a dataset; an unsupported element type is an error naming it.
    DatasetInfo info(const std::string& name) const;
    // Checks presence, dtype and shape before reading; the first mismatch is reported as
    // "<file>:/layers/fc1/codes: expected uint8 (256, 196), found int8 (256, 196)".
    void read(const std::string& name, DType expected, const std::vector<int64_t>& expected_shape,
              void* out) const;
    // read() into a new buffer of prod(shape) * dtype_size(expected) bytes.
    std::vector<uint8_t> read_bytes(const std::string& name, DType expected,
                                    const std::vector<int64_t>& expected_shape) const;

  private:
    friend class File;
    Group(detail::Handle id, std::string file, std::string path)
        : id_(std::move(id)), file_(std::move(file)), path_(std::move(path)) {}
    std::string child_path(const std::string& name) const;
    std::string where(const std::string& name) const;       // "<file>:<path>/<name>"
    std::string attr_where(const std::string& name) const;  // "<file>:<path>@<name>"
    void check_name(const std::string& name) const;
    void check_int64_range(const std::string& name, bool fits) const;
    // Opens attribute `name`, checking it is one value of HDF5 type class `cls`: (attr, type).
    std::pair<detail::Handle, detail::Handle> open_attr(const std::string& name, int cls,
                                                        const char* expected) const;
    int object_kind(const std::string& name) const;  // H5I_type_t; H5I_BADID where missing
    detail::Handle open_object(const std::string& name, int kind) const;
    // Opens `name` and checks it is a dataset of `expected` dtype and shape.
    detail::Handle open_checked(const std::string& name, DType expected,
                                const std::vector<int64_t>& expected_shape) const;

    detail::Handle id_;
    std::string file_;
    std::string path_;
};

}  // namespace trit::h5
