// Hugging Face safetensors files: a memory-mapped reader that validates the whole header before any
// tensor is read, and a streaming writer. Layout: u64 little-endian header size N, N bytes of JSON
// ({name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}), then the data buffer. Limits:
// little-endian hosts only; tensors convert to float32 from F32, F16 and BF16 only.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace trit {

// Header size limit of the reference implementation (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// The dtypes the reference implementation knows. F4 and F6 are packed (sub-byte) formats.
enum class SafetensorsDtype {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
};

// "F32", ... as written in headers.
const char* to_string(SafetensorsDtype dtype);
// Bits per element (4 for F4, 64 for C64).
int dtype_bits(SafetensorsDtype dtype);
// The dtype named `name`; throws trit::Error listing the known names otherwise.
SafetensorsDtype safetensors_dtype(const std::string& name);
// "BOOL, F4, ..., U64".
std::string safetensors_dtype_names();

struct SafetensorsTensorInfo {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::F32;
    std::vector<int64_t> shape;  // [] for a scalar
    uint64_t begin = 0;          // data_offsets, relative to the start of the data buffer
    uint64_t end = 0;
    int64_t numel() const;  // 1 for a scalar, 0 when a dimension is 0
    uint64_t bytes() const { return end - begin; }
};

class SafetensorsFile {
  public:
    SafetensorsFile(SafetensorsFile&&) noexcept = default;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;
    ~SafetensorsFile();

    const std::string& path() const { return path_; }
    // Tensor names in the order of their data in the file (by data_offsets; ties, which only
    // empty tensors can have, in header order).
    const std::vector<std::string>& names() const { return names_; }
    bool has(const std::string& name) const;
    // Throws trit::Error naming the file and the tensor when there is no such tensor.
    const SafetensorsTensorInfo& info(const std::string& name) const;
    // "__metadata__" (empty when absent).
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    uint64_t header_size() const { return header_size_; }  // N, padding included
    uint64_t data_size() const { return data_size_; }      // bytes of the data buffer

    // The tensor as a new float32 tensor that owns its memory (F32, F16 or BF16; other dtypes
    // throw "dtype X is not supported for quantization; expected F32, F16 or BF16").
    torch::Tensor to_tensor(const std::string& name) const;
    // The tensor in its own dtype (float32, float16 or bfloat16), without a copy where the data
    // is aligned to its element size in memory, a copy otherwise (see view_is_zero_copy). A
    // zero-copy view keeps the mapping alive, so it stays valid after this SafetensorsFile is
    // gone; it is read-only: writing to it is a segmentation fault (clone() it first).
    torch::Tensor view(const std::string& name) const;
    // Whether view(name) maps the file rather than copying.
    bool view_is_zero_copy(const std::string& name) const;
    // The tensor's raw little-endian bytes inside the mapping (info(name).bytes() of them).
    const uint8_t* data(const std::string& name) const;
    // Lets the kernel drop the tensor's pages from this process's memory (madvise DONTNEED on the
    // whole pages inside it): for reading a file larger than memory tensor by tensor. The mapping
    // stays valid; a later read loads the pages from the file again.
    void release(const std::string& name) const;

  private:
    struct Mapping;
    friend SafetensorsFile open_safetensors(const std::string& path);
    SafetensorsFile() = default;
    const SafetensorsTensorInfo& checked_float_info(const std::string& name) const;

    std::string path_;
    std::shared_ptr<Mapping> mapping_;
    std::vector<SafetensorsTensorInfo> tensors_;  // in names_ order
    std::map<std::string, size_t> index_;         // name -> position in tensors_
    std::vector<std::string> names_;
    std::map<std::string, std::string> metadata_;
    uint64_t header_size_ = 0;
    uint64_t data_size_ = 0;
};

// Maps `path` read-only and validates its header completely; throws trit::Error
// "<path>: tensor '<name>': expected ..., got ..." for anything malformed (see docs/formats.md).
SafetensorsFile open_safetensors(const std::string& path);

// One tensor of a file being written.
struct SafetensorsEntry {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::F32;  // F32, F16 or BF16
    std::vector<int64_t> shape;
};

// Streams a safetensors file: the declarations fix the header (tensors in declaration order,
// contiguous, header padded with spaces to a multiple of 8 bytes like the reference writer); then
// each tensor's elements arrive in order, in chunks of any size, and are converted on the fly
// (round to nearest even). Writes `<path>.tmp` and renames it over `path` at close(); a writer
// destroyed before close() removes the partial file.
class SafetensorsWriter {
  public:
    SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries,
                      const std::map<std::string, std::string>& metadata = {});
    SafetensorsWriter(const SafetensorsWriter&) = delete;
    SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
    ~SafetensorsWriter();

    // The next `count` elements of tensor `name`, which must be the tensor being written or,
    // when that one is complete, the next declared one with elements.
    void write(const std::string& name, const float* data, int64_t count);
    // A chunk of any floating dtype on any device (converted to float32 on the CPU first).
    void write(const std::string& name, const torch::Tensor& chunk);
    // Checks that every declared element was written, then flushes and renames the file.
    void close();

  private:
    void advance_to(const std::string& name);
    void put(const void* bytes, size_t n);
    void flush();

    std::string path_;
    std::string tmp_path_;
    int fd_ = -1;
    std::vector<SafetensorsEntry> entries_;
    std::vector<int64_t> numel_;
    size_t current_ = 0;   // entry being written
    int64_t written_ = 0;  // elements of entries_[current_] written so far
    std::vector<char> buffer_;
    bool closed_ = false;
};

// Writes `tensors` (any floating dtype) as a safetensors file; dtypes[i] (F32, F16 or BF16) is
// tensor i's dtype in the file, all F32 when `dtypes` is empty. Streams each tensor in chunks.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::vector<SafetensorsDtype>& dtypes = {},
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace trit
