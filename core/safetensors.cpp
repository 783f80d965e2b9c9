// safetensors reader and writer: see safetensors.h. The reader checks what the reference
// implementation (huggingface/safetensors, tensor.rs) checks, with messages that name the file,
// the tensor, what was expected and what was found, plus strict JSON and exact header keys.
#include "core/safetensors.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"

static_assert(
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
    "safetensors data is little-endian; trit reads it in place on little-endian hosts only");

namespace trit {
namespace {

struct DtypeRow {
    SafetensorsDtype dtype;
    const char* name;
    int bits;
};

// In the reference implementation's order (increasing alignment).
constexpr DtypeRow kDtypes[] = {
    {SafetensorsDtype::BOOL, "BOOL", 8},       {SafetensorsDtype::F4, "F4", 4},
    {SafetensorsDtype::F6_E2M3, "F6_E2M3", 6}, {SafetensorsDtype::F6_E3M2, "F6_E3M2", 6},
    {SafetensorsDtype::U8, "U8", 8},           {SafetensorsDtype::I8, "I8", 8},
    {SafetensorsDtype::F8_E5M2, "F8_E5M2", 8}, {SafetensorsDtype::F8_E4M3, "F8_E4M3", 8},
    {SafetensorsDtype::F8_E8M0, "F8_E8M0", 8}, {SafetensorsDtype::I16, "I16", 16},
    {SafetensorsDtype::U16, "U16", 16},        {SafetensorsDtype::F16, "F16", 16},
    {SafetensorsDtype::BF16, "BF16", 16},      {SafetensorsDtype::I32, "I32", 32},
    {SafetensorsDtype::U32, "U32", 32},        {SafetensorsDtype::F32, "F32", 32},
    {SafetensorsDtype::C64, "C64", 64},        {SafetensorsDtype::F64, "F64", 64},
    {SafetensorsDtype::I64, "I64", 64},        {SafetensorsDtype::U64, "U64", 64},
};

const DtypeRow& row(SafetensorsDtype dtype) {
    for (const DtypeRow& r : kDtypes)
        if (r.dtype == dtype) return r;
    TRIT_FAIL("invalid trit::SafetensorsDtype ", static_cast<int>(dtype));
}

bool is_float_dtype(SafetensorsDtype d) {
    return d == SafetensorsDtype::F32 || d == SafetensorsDtype::F16 || d == SafetensorsDtype::BF16;
}

torch::ScalarType scalar_type(SafetensorsDtype d) {
    if (d == SafetensorsDtype::F16) return torch::kFloat16;
    if (d == SafetensorsDtype::BF16) return torch::kBFloat16;
    return torch::kFloat32;
}

// "[2, 3]" for messages, "[2,3]" (compact, as the reference writes it) for headers.
std::string shape_text(const std::vector<int64_t>& shape, const char* sep = ", ") {
    std::ostringstream os;
    os << '[';
    for (size_t i = 0; i < shape.size(); ++i)
        os << (i ? sep : "") << shape[i];
    os << ']';
    return os.str();
}

std::string offsets_text(uint64_t begin, uint64_t end, const char* sep = ", ") {
    return "[" + std::to_string(begin) + sep + std::to_string(end) + "]";
}

// numel of `shape`, false on int64 overflow.
bool checked_numel(const std::vector<int64_t>& shape, int64_t& numel) {
    numel = 1;
    for (const int64_t d : shape)
        if (__builtin_mul_overflow(numel, d, &numel)) return false;
    return true;
}

// Describes a JSON value for "got ..." (arrays by length, which a reader can count).
std::string got(const json::Value& v) {
    if (v.is_array()) return "an array of length " + std::to_string(v.as_array().size());
    return v.describe();
}

// The fields of one header entry, checked: "<file>: tensor '<name>': ..." on failure.
SafetensorsTensorInfo parse_entry(const std::string& where, const std::string& name,
                                  const json::Value& v, uint64_t data_size) {
    TRIT_CHECK(v.is_object(), where,
               "expected an object {\"dtype\", \"shape\", \"data_offsets\"}, got ", got(v));
    const json::Value* dtype = nullptr;
    const json::Value* shape = nullptr;
    const json::Value* offsets = nullptr;
    for (const json::Member& m : v.as_object()) {
        if (m.key == "dtype") {
            dtype = &m.value;
        } else if (m.key == "shape") {
            shape = &m.value;
        } else if (m.key == "data_offsets") {
            offsets = &m.value;
        } else {
            TRIT_FAIL(where, "expected only the keys dtype, shape and data_offsets, got the key ",
                      json::quote(m.key));
        }
    }
    TRIT_CHECK(dtype != nullptr, where, "expected a key 'dtype', got none");
    TRIT_CHECK(shape != nullptr, where, "expected a key 'shape', got none");
    TRIT_CHECK(offsets != nullptr, where, "expected a key 'data_offsets', got none");

    SafetensorsTensorInfo t;
    t.name = name;
    TRIT_CHECK(dtype->is_string(), where, "dtype: expected a string, got ", got(*dtype));
    bool known = false;
    for (const DtypeRow& r : kDtypes) {
        if (dtype->as_string() == r.name) {
            t.dtype = r.dtype;
            known = true;
        }
    }
    TRIT_CHECK(known, where, "dtype: expected one of ", safetensors_dtype_names(), ", got ",
               json::quote(dtype->as_string()));

    TRIT_CHECK(shape->is_array(), where, "shape: expected an array of non-negative integers, got ",
               got(*shape));
    const auto& dims = shape->as_array();
    for (size_t i = 0; i < dims.size(); ++i) {
        const json::Value& d = dims[i];
        TRIT_CHECK(d.is_int64() && d.as_int64() >= 0, where, "shape[", i,
                   "]: expected a non-negative integer below 2^63, got ", got(d));
        t.shape.push_back(d.as_int64());
    }

    const bool pair = offsets->is_array() && offsets->as_array().size() == 2;
    TRIT_CHECK(pair, where, "data_offsets: expected [begin, end], got ", got(*offsets));
    uint64_t be[2];
    for (size_t i = 0; i < 2; ++i) {
        const json::Value& o = offsets->as_array()[i];
        TRIT_CHECK(o.is_uint64(), where, "data_offsets[", i,
                   "]: expected an integer in [0, 2^64 - 1], got ", got(o));
        be[i] = o.as_uint64();
    }
    t.begin = be[0];
    t.end = be[1];
    TRIT_CHECK(t.begin <= t.end, where,
               "data_offsets: expected [begin, end] with begin <= end, got ",
               offsets_text(t.begin, t.end));

    int64_t numel = 0;
    TRIT_CHECK(checked_numel(t.shape, numel), where, "shape ", shape_text(t.shape),
               ": expected at most 2^63 - 1 elements, got an overflow");
    const auto bits_per = static_cast<uint64_t>(row(t.dtype).bits);
    uint64_t bits = 0;
    TRIT_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), bits_per, &bits), where,
               "shape ", shape_text(t.shape), " of ", to_string(t.dtype),
               ": expected a size below 2^64 bits, got an overflow");
    TRIT_CHECK(bits % 8 == 0, where, "shape ", shape_text(t.shape), " of ", to_string(t.dtype),
               ": expected a whole number of bytes, got ", bits, " bits");
    TRIT_CHECK(t.end <= data_size, where, "data_offsets ", offsets_text(t.begin, t.end),
               ": expected an end within the data buffer (", data_size,
               " bytes), got offsets past the end (end ", t.end, ")");
    TRIT_CHECK(t.bytes() == bits / 8, where, "data_offsets ", offsets_text(t.begin, t.end),
               ": expected ", bits / 8, " bytes (", numel, " elements of ", to_string(t.dtype),
               ", shape ", shape_text(t.shape), "), got ", t.bytes(), " bytes");
    return t;
}

// Closes a file descriptor on scope exit.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

const char* to_string(SafetensorsDtype dtype) {
    return row(dtype).name;
}

int dtype_bits(SafetensorsDtype dtype) {
    return row(dtype).bits;
}

std::string safetensors_dtype_names() {
    std::string out;
    for (const DtypeRow& r : kDtypes)
        out += (out.empty() ? "" : ", ") + std::string(r.name);
    return out;
}

SafetensorsDtype safetensors_dtype(const std::string& name) {
    for (const DtypeRow& r : kDtypes)
        if (name == r.name) return r.dtype;
    TRIT_FAIL("unknown safetensors dtype '", name, "'; expected one of ",
              safetensors_dtype_names());
}

int64_t SafetensorsTensorInfo::numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// ---- reading ----

struct SafetensorsFile::Mapping {
    void* addr = nullptr;
    size_t size = 0;
    Mapping(void* a, size_t n) : addr(a), size(n) {}
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() { ::munmap(addr, size); }
    const uint8_t* bytes() const { return static_cast<const uint8_t*>(addr); }
};

SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile open_safetensors(const std::string& path) {
    Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    TRIT_CHECK(fd.fd >= 0, path, ": cannot open the safetensors file: ",
               errno == ENOENT ? "no such file" : std::strerror(errno));
    struct stat st;
    TRIT_CHECK(::fstat(fd.fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
    TRIT_CHECK(S_ISREG(st.st_mode), path, ": expected a regular file, got ",
               S_ISDIR(st.st_mode) ? "a directory" : "a special file");
    const auto size = static_cast<uint64_t>(st.st_size);
    TRIT_CHECK(size >= 8, path, ": expected at least 8 bytes (the header size), got a file of ",
               size, " bytes (truncated)");
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
    TRIT_CHECK(addr != MAP_FAILED, path, ": cannot map ", size, " bytes: ", std::strerror(errno));

    SafetensorsFile f;
    f.path_ = path;
    f.mapping_ = std::make_shared<SafetensorsFile::Mapping>(addr, static_cast<size_t>(size));
    const uint8_t* base = f.mapping_->bytes();
    uint64_t n = 0;
    std::memcpy(&n, base, 8);
    TRIT_CHECK(n <= kSafetensorsMaxHeader, path, ": header size: expected at most ",
               kSafetensorsMaxHeader, " bytes, got ", n);
    TRIT_CHECK(n <= size - 8, path, ": header size: expected at most ", size - 8,
               " bytes (the rest of the file), got ", n, " (past the end of the file)");
    f.header_size_ = n;
    f.data_size_ = size - 8 - n;

    const json::Value root = json::parse(
        std::string_view(reinterpret_cast<const char*>(base + 8), static_cast<size_t>(n)),
        path + ": header");
    TRIT_CHECK(root.is_object(), path, ": header: expected a JSON object, got ", got(root));

    std::vector<SafetensorsTensorInfo> tensors;
    for (const json::Member& m : root.as_object()) {
        if (m.key == "__metadata__") {
            TRIT_CHECK(m.value.is_object(), path,
                       ": __metadata__: expected an object of strings, got ", got(m.value));
            for (const json::Member& kv : m.value.as_object()) {
                TRIT_CHECK(kv.value.is_string(), path, ": __metadata__ '", kv.key,
                           "': expected a string, got ", got(kv.value));
                f.metadata_[kv.key] = kv.value.as_string();
            }
            continue;
        }
        tensors.push_back(
            parse_entry(path + ": tensor '" + m.key + "': ", m.key, m.value, f.data_size_));
    }

    // Like the reference: sorted by offsets, the tensors must tile the data buffer exactly.
    std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
        return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
    });
    uint64_t covered = 0;
    const SafetensorsTensorInfo* prev = nullptr;
    for (const SafetensorsTensorInfo& t : tensors) {
        const std::string where = path + ": tensor '" + t.name + "': ";
        const std::string after = prev == nullptr
                                      ? std::string("at byte 0, the start of the data buffer")
                                      : "at byte " + std::to_string(covered) + ", where tensor '" +
                                            prev->name + "' " +
                                            offsets_text(prev->begin, prev->end) + " ends";
        TRIT_CHECK(t.begin <= covered, where, "expected its data to start ", after,
                   ", got data_offsets ", offsets_text(t.begin, t.end), ": a gap of ",
                   t.begin - covered, " bytes");
        TRIT_CHECK(t.begin == covered, where, "expected its data to start ", after,
                   ", got data_offsets ", offsets_text(t.begin, t.end), ", which overlap tensor '",
                   prev->name, "'");
        covered = t.end;
        prev = &t;
    }
    TRIT_CHECK(covered == f.data_size_, path, ": expected the tensors to cover the data buffer (",
               f.data_size_, " bytes), got ", f.data_size_ - covered, " bytes after the end of ",
               prev == nullptr ? std::string("the header (no tensors)")
                               : "the last tensor '" + prev->name + "'");

    for (size_t i = 0; i < tensors.size(); ++i) {
        f.index_[tensors[i].name] = i;
        f.names_.push_back(tensors[i].name);
    }
    f.tensors_ = std::move(tensors);
    return f;
}

bool SafetensorsFile::has(const std::string& name) const {
    return index_.count(name) != 0;
}

const SafetensorsTensorInfo& SafetensorsFile::info(const std::string& name) const {
    const auto it = index_.find(name);
    TRIT_CHECK(it != index_.end(), path_, ": tensor '", name,
               "': expected a tensor of that name, got none (", tensors_.size(),
               " tensors in the file)");
    return tensors_[it->second];
}

const uint8_t* SafetensorsFile::data(const std::string& name) const {
    const SafetensorsTensorInfo& t = info(name);
    return mapping_->bytes() + 8 + header_size_ + t.begin;
}

void SafetensorsFile::release(const std::string& name) const {
    const SafetensorsTensorInfo& t = info(name);
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t begin = 8 + header_size_ + t.begin, end = 8 + header_size_ + t.end;
    const uint64_t first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages
    if (last > first) ::madvise(static_cast<uint8_t*>(mapping_->addr) + first, last - first, MADV_DONTNEED);
}

const SafetensorsTensorInfo& SafetensorsFile::checked_float_info(const std::string& name) const {
    const SafetensorsTensorInfo& t = info(name);
    TRIT_CHECK(is_float_dtype(t.dtype), path_, ": tensor '", name, "': dtype ", to_string(t.dtype),
               " is not supported for quantization; expected F32, F16 or BF16");
    return t;
}

bool SafetensorsFile::view_is_zero_copy(const std::string& name) const {
    const SafetensorsTensorInfo& t = checked_float_info(name);
    const auto bytes_per = static_cast<uintptr_t>(dtype_bits(t.dtype) / 8);
    return reinterpret_cast<uintptr_t>(data(name)) % bytes_per == 0;
}

torch::Tensor SafetensorsFile::view(const std::string& name) const {
    const SafetensorsTensorInfo& t = checked_float_info(name);
    const auto options = torch::TensorOptions().dtype(scalar_type(t.dtype));
    const uint8_t* p = data(name);
    if (view_is_zero_copy(name)) {
        // The deleter holds the mapping: the view outlives this object safely. PROT_READ pages.
        std::shared_ptr<Mapping> keep = mapping_;
        return torch::from_blob(
            const_cast<uint8_t*>(p), t.shape, [keep](void*) {}, options);
    }
    torch::Tensor out = torch::empty(t.shape, options);
    if (t.bytes() > 0) std::memcpy(out.data_ptr(), p, t.bytes());
    return out;
}

torch::Tensor SafetensorsFile::to_tensor(const std::string& name) const {
    const SafetensorsTensorInfo& t = checked_float_info(name);
    if (t.dtype == SafetensorsDtype::F32) {
        torch::Tensor out = torch::empty(t.shape, torch::kFloat32);
        if (t.bytes() > 0) std::memcpy(out.data_ptr(), data(name), t.bytes());
        return out;
    }
    return view(name).to(torch::kFloat32);
}

// ---- writing ----

namespace {
constexpr size_t kWriteBuffer = size_t{1} << 20;
}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), tmp_path_(path + ".tmp"), entries_(std::move(entries)) {
    TRIT_CHECK(!path.empty(), "cannot write a safetensors file with an empty path");
    std::string header = "{";
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        bool first = true;
        for (const auto& [k, v] : metadata) {
            TRIT_CHECK(json::is_valid_utf8(k) && json::is_valid_utf8(v), path,
                       ": __metadata__: expected UTF-8 keys and values, got invalid bytes");
            header += (first ? "" : ",") + json::quote(k) + ":" + json::quote(v);
            first = false;
        }
        header += "}";
    }
    std::map<std::string, size_t> seen;
    uint64_t offset = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
        const SafetensorsEntry& e = entries_[i];
        const std::string where = path + ": tensor '" + e.name + "': ";
        TRIT_CHECK(json::is_valid_utf8(e.name), where, "expected a UTF-8 name, got invalid bytes");
        TRIT_CHECK(e.name != "__metadata__", where, "expected a tensor name, got the reserved key");
        TRIT_CHECK(seen.emplace(e.name, i).second, where, "expected unique names, got it twice");
        TRIT_CHECK(is_float_dtype(e.dtype), where, "the writer takes F32, F16 or BF16, got ",
                   to_string(e.dtype));
        for (const int64_t d : e.shape)
            TRIT_CHECK(d >= 0, where, "expected non-negative dimensions, got shape ",
                       shape_text(e.shape));
        int64_t numel = 0;
        TRIT_CHECK(checked_numel(e.shape, numel) && numel <= (INT64_MAX / 4), where, "shape ",
                   shape_text(e.shape), ": expected fewer than 2^61 elements, got an overflow");
        numel_.push_back(numel);
        const uint64_t bytes = static_cast<uint64_t>(numel) * (dtype_bits(e.dtype) / 8);
        header += (header.size() > 1 ? "," : "") + json::quote(e.name) + ":{\"dtype\":\"" +
                  to_string(e.dtype) + "\",\"shape\":" + shape_text(e.shape, ",") +
                  ",\"data_offsets\":" + offsets_text(offset, offset + bytes, ",") + "}";
        offset += bytes;
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');

    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TRIT_CHECK(fd_ >= 0, "cannot create '", tmp_path_, "': ", std::strerror(errno));
    buffer_.reserve(kWriteBuffer);
    const uint64_t n = header.size();
    put(&n, 8);
    put(header.data(), header.size());
}

SafetensorsWriter::~SafetensorsWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (!closed_) fs::remove_file(tmp_path_);
}

void SafetensorsWriter::flush() {
    size_t done = 0;
    while (done < buffer_.size()) {
        const ssize_t w = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
        if (w < 0 && errno == EINTR) continue;
        TRIT_CHECK(w > 0, "cannot write '", tmp_path_, "': ", std::strerror(errno));
        done += static_cast<size_t>(w);
    }
    buffer_.clear();
}

void SafetensorsWriter::put(const void* bytes, size_t n) {
    const char* p = static_cast<const char*>(bytes);
    while (n > 0) {
        const size_t take = std::min(n, kWriteBuffer - buffer_.size());
        buffer_.insert(buffer_.end(), p, p + take);
        p += take;
        n -= take;
        if (buffer_.size() == kWriteBuffer) flush();
    }
}

void SafetensorsWriter::advance_to(const std::string& name) {
    const std::string where = path_ + ": tensor '" + name + "': ";
    size_t index = entries_.size();
    for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name == name) index = i;
    TRIT_CHECK(index < entries_.size(), where,
               "expected one of the declared tensors, got data for an undeclared one");
    TRIT_CHECK(index >= current_, where,
               "expected data in declaration order, got more after tensor '",
               entries_[current_].name, "' was started");
    while (current_ < index) {
        TRIT_CHECK(written_ == numel_[current_], where, "expected the rest of tensor '",
                   entries_[current_].name, "' first (", written_, " of ", numel_[current_],
                   " elements written), got data for '", name, "'");
        ++current_;
        written_ = 0;
    }
}

void SafetensorsWriter::write(const std::string& name, const float* data, int64_t count) {
    TRIT_CHECK(fd_ >= 0 && !closed_, path_, ": tensor '", name,
               "': expected an open writer, got a closed one");
    TRIT_CHECK(count >= 0, path_, ": tensor '", name, "': expected a count >= 0, got ", count);
    if (count == 0) return;
    advance_to(name);
    TRIT_CHECK(written_ + count <= numel_[current_], path_, ": tensor '", name, "': expected ",
               numel_[current_], " elements, got ", written_ + count, " or more");
    const SafetensorsDtype dtype = entries_[current_].dtype;
    if (dtype == SafetensorsDtype::F32) {
        put(data, static_cast<size_t>(count) * sizeof(float));
    } else {
        uint16_t block[4096];
        for (int64_t i = 0; i < count; i += 4096) {
            const int64_t m = std::min<int64_t>(4096, count - i);
            for (int64_t j = 0; j < m; ++j)
                block[j] = dtype == SafetensorsDtype::F16 ? c10::Half(data[i + j]).x
                                                          : c10::BFloat16(data[i + j]).x;
            put(block, static_cast<size_t>(m) * 2);
        }
    }
    written_ += count;
}

void SafetensorsWriter::write(const std::string& name, const torch::Tensor& chunk) {
    TRIT_CHECK(chunk.is_floating_point(), path_, ": tensor '", name,
               "': expected a floating-point chunk, got ", chunk.scalar_type());
    const torch::Tensor c = chunk.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    write(name, c.data_ptr<float>(), c.numel());
}

void SafetensorsWriter::close() {
    TRIT_CHECK(fd_ >= 0 && !closed_, path_, ": expected an open writer, got a closed one");
    for (size_t i = current_; i < entries_.size(); ++i) {
        const int64_t done = i == current_ ? written_ : 0;
        TRIT_CHECK(done == numel_[i], path_, ": tensor '", entries_[i].name, "': expected ",
                   numel_[i], " elements, got ", done, " at close");
    }
    flush();
    TRIT_CHECK(::fsync(fd_) == 0, "cannot sync '", tmp_path_, "': ", std::strerror(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    TRIT_CHECK(rc == 0, "cannot close '", tmp_path_, "': ", std::strerror(errno));
    fs::replace_file(tmp_path_, path_);
    closed_ = true;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::vector<SafetensorsDtype>& dtypes,
                       const std::map<std::string, std::string>& metadata) {
    TRIT_CHECK(dtypes.empty() || dtypes.size() == tensors.size(), path, ": expected ",
               tensors.size(), " dtypes (one per tensor) or none, got ", dtypes.size());
    std::vector<SafetensorsEntry> entries;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& [name, t] = tensors[i];
        entries.push_back(
            {name, dtypes.empty() ? SafetensorsDtype::F32 : dtypes[i], t.sizes().vec()});
    }
    SafetensorsWriter w(path, std::move(entries), metadata);
    constexpr int64_t kChunk = int64_t{1} << 20;  // elements converted and written at a time
    for (const auto& [name, t] : tensors) {
        const torch::Tensor flat = t.detach().reshape({-1});
        for (int64_t i = 0; i < flat.numel(); i += kChunk)
            w.write(name, flat.slice(0, i, std::min(flat.numel(), i + kChunk)));
    }
    w.close();
}

}  // namespace trit
