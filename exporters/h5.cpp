// trit::h5 on the HDF5 C API (see h5.h): every call is checked, its failure turned into a
// trit::Error carrying the innermost HDF5 message; HDF5's own printing to stderr is switched off.
// Types are recognised by class, size and bit fields, never by id, so files from h5py read too.
#include "exporters/h5.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/error.h"

namespace trit::h5 {

static_assert(std::is_same_v<hid_t, int64_t>, "trit::h5 needs HDF5 >= 1.10 (64-bit hid_t)");
static_assert(std::is_same_v<herr_t, int>, "detail::Handle::Closer assumes herr_t is int");

using detail::Handle;

namespace {

// HDF5 prints its error stack to stderr by default; trit reports through trit::Error instead.
// The setting is per thread in threadsafe HDF5 builds, so every entry point makes sure of it.
void quiet() {
    thread_local bool done = false;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        done = true;
    }
}

struct Hdf5Error {
    std::string innermost;   // the most specific message on the stack
    bool truncated = false;  // some entry says the file is shorter than its superblock says
};

// Takes (and clears) the calling thread's HDF5 error stack. Must run before any other HDF5 call,
// since each API call starts by clearing the stack.
Hdf5Error take_error() {
    Hdf5Error out;
    auto walk = [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
        auto* err = static_cast<Hdf5Error*>(data);
        if (n == 0 && e->desc) err->innermost = e->desc;
        if (e->min_num == H5E_TRUNCATED || (e->desc && std::strstr(e->desc, "truncated")))
            err->truncated = true;
        return 0;
    };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &out);
    H5Eclear2(H5E_DEFAULT);
    return out;
}

// " (HDF5: <innermost message>)", or "" where the stack is empty.
std::string reason() {
    const std::string msg = take_error().innermost;
    return msg.empty() ? std::string() : " (HDF5: " + msg + ")";
}

Handle own(hid_t id, Handle::Closer close, const std::string& what) {
    if (id < 0) TRIT_FAIL(what, reason());
    return Handle(id, close);
}

void check(herr_t status, const std::string& what) {
    if (status < 0) TRIT_FAIL(what, reason());
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string out = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(shape[i]);
    }
    return out + ")";
}

// Indexed by DType, like ggml's type_traits.
struct Traits {
    const char* name;
    int64_t size;
};
constexpr Traits kTraits[] = {{"uint8", 1},   {"int8", 1},    {"int32", 4},   {"int64", 8},
                              {"float32", 4}, {"float16", 2}, {"bfloat16", 2}};

bool valid_dtype(DType dtype) {
    return static_cast<unsigned>(dtype) < std::size(kTraits);
}

// A 16-bit float type derived from a 32-bit one (h5py builds float16 the same way).
Handle half_type(hid_t f32, DType dtype) {
    Handle t = own(H5Tcopy(f32), H5Tclose, "cannot copy a float type");
    const bool f16 = dtype == DType::kF16;
    // fields: sign bit, exponent position and size, mantissa position and size
    check(H5Tset_fields(t.get(), 15, f16 ? 10 : 7, f16 ? 5 : 8, 0, f16 ? 10 : 7),
          "cannot set 16-bit float fields");
    check(H5Tset_size(t.get(), 2), "cannot set 16-bit float size");
    check(H5Tset_ebias(t.get(), f16 ? 15 : 127), "cannot set 16-bit float exponent bias");
    return t;
}

// The type written to files (little-endian) or used in memory (native) for a DType.
Handle make_type(DType dtype, bool in_file) {
    TRIT_CHECK(valid_dtype(dtype), "invalid trit::h5::DType ", static_cast<int>(dtype));
    if (dtype == DType::kF16 || dtype == DType::kBF16)
        return half_type(in_file ? H5T_IEEE_F32LE : H5T_NATIVE_FLOAT, dtype);
    const hid_t file_types[] = {H5T_STD_U8LE, H5T_STD_I8LE, H5T_STD_I32LE, H5T_STD_I64LE,
                                H5T_IEEE_F32LE};
    const hid_t mem_types[] = {H5T_NATIVE_UINT8, H5T_NATIVE_INT8, H5T_NATIVE_INT32,
                               H5T_NATIVE_INT64, H5T_NATIVE_FLOAT};
    const auto i = static_cast<size_t>(dtype);
    return own(H5Tcopy(in_file ? file_types[i] : mem_types[i]), H5Tclose,
               "cannot copy an HDF5 type");
}

// "float, 8 bytes", "signed integer, 2 bytes", "string, variable-length", ...
std::string describe_type(hid_t type) {
    const H5T_class_t cls = H5Tget_class(type);
    if (cls == H5T_STRING && H5Tis_variable_str(type) > 0) return "string, variable-length";
    static const char* const kNames[H5T_NCLASSES] = {
        "integer", "float",    "time",      "string", "bitfield",
        "opaque",  "compound", "reference", "enum",   "variable-length sequence",
        "array"};
    std::string name = cls >= 0 && cls < H5T_NCLASSES ? kNames[cls] : "unknown class";
    if (cls == H5T_INTEGER)
        name = H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned integer" : "signed integer";
    return name + ", " + std::to_string(H5Tget_size(type)) + " bytes";
}

// The DType of an HDF5 type, by class, size and bit layout (either byte order).
bool classify(hid_t type, DType* out) {
    const H5T_class_t cls = H5Tget_class(type);
    const size_t size = H5Tget_size(type);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) return false;
    const H5T_order_t order = H5Tget_order(type);
    if (order != H5T_ORDER_LE && order != H5T_ORDER_BE) return false;
    if (H5Tget_precision(type) != 8 * size || H5Tget_offset(type) != 0) return false;
    if (cls == H5T_INTEGER) {
        const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
        if (size == 1) {
            *out = is_signed ? DType::kI8 : DType::kU8;
            return true;
        }
        if (!is_signed || (size != 4 && size != 8)) return false;
        *out = size == 4 ? DType::kI32 : DType::kI64;
        return true;
    }
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
    if (H5Tget_norm(type) != H5T_NORM_IMPLIED || mpos != 0) return false;
    const size_t ebias = H5Tget_ebias(type);
    struct Layout {
        size_t size, spos, epos, esize, msize, ebias;
        DType dtype;
    };
    static const Layout kLayouts[] = {{4, 31, 23, 8, 23, 127, DType::kF32},
                                      {2, 15, 10, 5, 10, 15, DType::kF16},
                                      {2, 15, 7, 8, 7, 127, DType::kBF16}};
    for (const Layout& l : kLayouts) {
        if (size == l.size && spos == l.spos && epos == l.epos && esize == l.esize &&
            msize == l.msize && ebias == l.ebias) {
            *out = l.dtype;
            return true;
        }
    }
    return false;
}

// The extent of a dataspace; false (with `why`) for a null dataspace or an unreadable one.
bool read_shape(hid_t space, std::vector<int64_t>* shape, std::string* why) {
    const H5S_class_t cls = H5Sget_simple_extent_type(space);
    if (cls == H5S_SCALAR) {
        shape->clear();
        return true;
    }
    if (cls != H5S_SIMPLE) {
        *why = cls == H5S_NULL ? "(null dataspace)" : "(unreadable dataspace)";
        return false;
    }
    const int rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0 || rank > H5S_MAX_RANK) {
        *why = "(unreadable dataspace)";
        return false;
    }
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (H5Sget_simple_extent_dims(space, dims.data(), nullptr) < 0) {
        *why = "(unreadable dataspace)";
        return false;
    }
    shape->assign(dims.begin(), dims.end());
    int64_t bytes = 8;  // the largest element: no dimension may overflow an int64 byte count
    for (int64_t d : *shape) {
        if (d < 0 || (d != 0 && bytes > INT64_MAX / d)) {
            *why = "(dimensions overflow)";
            return false;
        }
        bytes *= d;
    }
    return true;
}

// Number of elements of `shape`, or -1 where a dimension is negative or the byte count of
// `elem_size`-byte elements would overflow int64.
int64_t numel(const std::vector<int64_t>& shape, int64_t elem_size) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return -1;
        if (d != 0 && n > INT64_MAX / elem_size / d) return -1;
        n *= d;
    }
    return n;
}

// Row blocks of about kChunkTargetBytes: leading dimensions of 1, then a partial dimension, then
// the trailing dimensions whole.
std::vector<hsize_t> chunk_dims(const std::vector<int64_t>& shape, int64_t elem_size) {
    std::vector<hsize_t> chunk(shape.begin(), shape.end());
    for (size_t d = 0; d < shape.size(); ++d) {
        int64_t inner = elem_size;  // bytes of one step along dimension d
        for (size_t e = d + 1; e < shape.size(); ++e)
            inner *= shape[e];
        if (inner >= kChunkTargetBytes) {
            chunk[d] = 1;
            continue;
        }
        chunk[d] = static_cast<hsize_t>(
            std::min(shape[d], std::max<int64_t>(1, kChunkTargetBytes / inner)));
        break;
    }
    return chunk;
}

Handle link_create_plist() {
    Handle lcpl = own(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "cannot create a property list");
    check(H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8), "cannot set UTF-8 link names");
    return lcpl;
}

Handle file_access_plist(bool for_writing) {
    Handle fapl = own(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "cannot create a property list");
    if (for_writing) {
        // The 1.10 format checksums all metadata (superblock, object headers, chunk indices).
        check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110),
              "cannot select the HDF5 1.10 file format");
    }
#if H5_VERSION_GE(1, 10, 7)
    // File systems without locks (some NFS and Lustre mounts) would otherwise refuse every open.
    check(H5Pset_file_locking(fapl.get(), true, true), "cannot set file locking");
#endif
    return fapl;
}

// "error message = '...'" from HDF5's open failure, else the whole message.
std::string open_reason(const std::string& hdf5_message) {
    const std::string key = "error message = '";
    const auto at = hdf5_message.find(key);
    if (at == std::string::npos) return hdf5_message;
    const auto end = hdf5_message.find('\'', at + key.size());
    return hdf5_message.substr(at + key.size(),
                               end == std::string::npos ? end : end - at - key.size());
}

// Bytes of the superblock that starts a file (signature at offset 0), from its first 16 bytes;
// 0 where the version is unknown.
size_t superblock_size(const unsigned char* head) {
    const unsigned version = head[8];
    if (version <= 1) return 48 + 6 * size_t{head[13]} + (version == 1 ? 4 : 0);  // O = head[13]
    if (version <= 3) return 16 + 4 * size_t{head[9]};                            // O = head[9]
    return 0;
}

const char* kind_text(H5I_type_t type) {
    return type == H5I_GROUP ? "group" : type == H5I_DATASET ? "dataset" : "object of another kind";
}

}  // namespace

// ---- DType ----

const char* dtype_name(DType dtype) {
    return valid_dtype(dtype) ? kTraits[static_cast<size_t>(dtype)].name : "invalid dtype";
}

int64_t dtype_size(DType dtype) {
    TRIT_CHECK(valid_dtype(dtype), "invalid trit::h5::DType ", static_cast<int>(dtype));
    return kTraits[static_cast<size_t>(dtype)].size;
}

// ---- Handle ----

namespace detail {

Handle::Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) {
    other.id_ = -1;
}

Handle& Handle::operator=(Handle&& other) noexcept {
    if (this != &other) {
        reset();
        id_ = other.id_;
        close_ = other.close_;
        other.id_ = -1;
    }
    return *this;
}

bool Handle::reset() {
    if (id_ < 0) return true;
    quiet();
    const bool ok = close_(id_) >= 0;
    id_ = -1;
    if (!ok) H5Eclear2(H5E_DEFAULT);
    return ok;
}

}  // namespace detail

// ---- File ----

File File::create(const std::string& path) {
    quiet();
    TRIT_CHECK(!path.empty(), "cannot create an HDF5 file with an empty path");
    Handle fcpl = own(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "cannot create a property list");
    // No timestamps in object headers: the same content gives the same bytes.
    check(H5Pset_obj_track_times(fcpl.get(), false), "cannot disable timestamps");
    Handle fapl = file_access_plist(/*for_writing=*/true);
    const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get());
    if (id < 0) {
        const std::string msg = take_error().innermost;
        TRIT_FAIL("cannot create HDF5 file '", path,
                  "': ", msg.empty() ? "unknown error" : open_reason(msg));
    }
    return File(Handle(id, H5Fclose), path);
}

File File::open(const std::string& path) {
    quiet();
    const std::string what = "cannot open HDF5 file '" + path + "': ";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        TRIT_FAIL(what, errno == ENOENT ? "no such file" : std::strerror(errno));
    }
    TRIT_CHECK(!S_ISDIR(st.st_mode), what, "it is a directory");
    const int fd = ::open(path.c_str(), O_RDONLY);
    TRIT_CHECK(fd >= 0, what, std::strerror(errno));
    unsigned char head[16] = {};
    const ssize_t got = ::read(fd, head, sizeof head);
    ::close(fd);
    TRIT_CHECK(got >= 0, what, std::strerror(errno));
    TRIT_CHECK(got > 0, what, "the file is empty (0 bytes), not an HDF5 file");
    static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    // HDF5 cannot read the stored end-of-file address from a file cut inside its superblock.
    if (std::memcmp(head, kSignature, std::min<size_t>(got, 8)) == 0) {
        const auto size = static_cast<size_t>(st.st_size);
        const size_t need = got < 16 ? 16 : superblock_size(head);
        TRIT_CHECK(size >= need, what, "the file is truncated (", size,
                   " bytes, cut inside the HDF5 superblock)");
    }
#if H5_VERSION_GE(1, 12, 0)
    const htri_t is_hdf5 = H5Fis_accessible(path.c_str(), H5P_DEFAULT);
#else
    const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
#endif
    if (is_hdf5 < 0) TRIT_FAIL(what, "cannot check for the HDF5 signature", reason());
    TRIT_CHECK(is_hdf5 > 0, what, "not an HDF5 file (no HDF5 signature found)");

    Handle fapl = file_access_plist(/*for_writing=*/false);
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    if (id < 0) {
        const Hdf5Error err = take_error();
        const std::string detail = err.innermost.empty() ? "" : " (HDF5: " + err.innermost + ")";
        if (err.truncated) TRIT_FAIL(what, "the file is truncated", detail);
        TRIT_FAIL(what, "the file is corrupt or unreadable", detail);
    }
    File file(Handle(id, H5Fclose), path);
    // Fail here, not at first use, where the root group is damaged.
    const hid_t root = H5Gopen2(id, "/", H5P_DEFAULT);
    if (root < 0) TRIT_FAIL(what, "the file is corrupt: cannot open the root group", reason());
    H5Gclose(root);
    return file;
}

Group File::root() const {
    quiet();
    TRIT_CHECK(id_.get() >= 0, "HDF5 file '", path_, "' is closed");
    Handle g = own(H5Gopen2(id_.get(), "/", H5P_DEFAULT), H5Gclose,
                   path_ + ":/: cannot open the root group");
    return Group(std::move(g), path_, "/");
}

void File::close() {
    quiet();
    if (id_.get() < 0) return;
    unsigned intent = 0;
    check(H5Fget_intent(id_.get(), &intent), "cannot query HDF5 file '" + path_ + "'");
    if (intent & H5F_ACC_RDWR)
        check(H5Fflush(id_.get(), H5F_SCOPE_GLOBAL), "cannot write HDF5 file '" + path_ + "'");
    if (!id_.reset()) TRIT_FAIL("cannot close HDF5 file '", path_, "'");
}

// ---- Group: structure ----

std::string Group::child_path(const std::string& name) const {
    return path_ == "/" ? "/" + name : path_ + "/" + name;
}

std::string Group::where(const std::string& name) const {
    return file_ + ":" + child_path(name);
}

std::string Group::attr_where(const std::string& name) const {
    return file_ + ":" + path_ + "@" + name;
}

void Group::check_name(const std::string& name) const {
    TRIT_CHECK(!name.empty() && name != "." && name.find('/') == std::string::npos &&
                   name.find('\0') == std::string::npos,
               file_, ":", path_, ": invalid name '", name,
               "' (expected one link name: not empty, no '/' or NUL, not '.')");
}

void Group::check_int64_range(const std::string& name, bool fits) const {
    TRIT_CHECK(fits, attr_where(name), ": integer value does not fit in int64");
}

Handle Group::open_object(const std::string& name, int kind) const {
    const char* expected = kind_text(static_cast<H5I_type_t>(kind));
    TRIT_CHECK(has(name), where(name), ": no such ", expected);
    Handle obj =
        own(H5Oopen(id_.get(), name.c_str(), H5P_DEFAULT), H5Oclose, where(name) + ": cannot open");
    const H5I_type_t found = H5Iget_type(obj.get());
    TRIT_CHECK(found == static_cast<H5I_type_t>(kind), where(name), ": expected a ", expected,
               ", found a ", kind_text(found));
    return obj;
}

Group Group::create_group(const std::string& name) {
    quiet();
    TRIT_CHECK(!has(name), where(name), ": cannot create group: the name exists");
    Handle lcpl = link_create_plist();
    Handle gcpl = own(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "cannot create a property list");
    check(H5Pset_obj_track_times(gcpl.get(), false), "cannot disable timestamps");
    Handle g = own(H5Gcreate2(id_.get(), name.c_str(), lcpl.get(), gcpl.get(), H5P_DEFAULT),
                   H5Gclose, where(name) + ": cannot create group");
    return Group(std::move(g), file_, child_path(name));
}

Group Group::open_group(const std::string& name) const {
    quiet();
    return Group(open_object(name, H5I_GROUP), file_, child_path(name));
}

std::vector<std::string> Group::children() const {
    quiet();
    H5G_info_t info;
    check(H5Gget_info(id_.get(), &info), file_ + ":" + path_ + ": cannot list the group");
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const ssize_t len = H5Lget_name_by_idx(id_.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                               nullptr, 0, H5P_DEFAULT);
        if (len < 0) TRIT_FAIL(file_, ":", path_, ": cannot list the group", reason());
        std::string name(static_cast<size_t>(len) + 1, '\0');
        if (H5Lget_name_by_idx(id_.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                               name.size(), H5P_DEFAULT) < 0)
            TRIT_FAIL(file_, ":", path_, ": cannot list the group", reason());
        name.resize(static_cast<size_t>(len));
        names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    return names;
}

bool Group::has(const std::string& name) const {
    quiet();
    check_name(name);
    const htri_t exists = H5Lexists(id_.get(), name.c_str(), H5P_DEFAULT);
    if (exists < 0) TRIT_FAIL(where(name), ": cannot look the name up", reason());
    return exists > 0;
}

int Group::object_kind(const std::string& name) const {
    if (!has(name)) return H5I_BADID;
    Handle obj =
        own(H5Oopen(id_.get(), name.c_str(), H5P_DEFAULT), H5Oclose, where(name) + ": cannot open");
    return H5Iget_type(obj.get());
}

bool Group::has_group(const std::string& name) const {
    return object_kind(name) == H5I_GROUP;
}

bool Group::has_dataset(const std::string& name) const {
    return object_kind(name) == H5I_DATASET;
}

// ---- Group: attributes ----

namespace {

void replace_attr(hid_t obj, const std::string& name, const std::string& where, hid_t file_type,
                  hid_t mem_type, const void* value) {
    const htri_t exists = H5Aexists(obj, name.c_str());
    if (exists < 0) TRIT_FAIL(where, ": cannot look the attribute up", reason());
    if (exists > 0) check(H5Adelete(obj, name.c_str()), where + ": cannot replace the attribute");
    Handle space = own(H5Screate(H5S_SCALAR), H5Sclose, "cannot create a dataspace");
    Handle acpl = own(H5Pcreate(H5P_ATTRIBUTE_CREATE), H5Pclose, "cannot create a property list");
    check(H5Pset_char_encoding(acpl.get(), H5T_CSET_UTF8), "cannot set UTF-8 attribute names");
    Handle attr =
        own(H5Acreate2(obj, name.c_str(), file_type, space.get(), acpl.get(), H5P_DEFAULT),
            H5Aclose, where + ": cannot create the attribute");
    check(H5Awrite(attr.get(), mem_type, value), where + ": cannot write the attribute");
}

}  // namespace

void Group::set_attr(const std::string& name, const std::string& value) {
    quiet();
    TRIT_CHECK(!name.empty(), file_, ":", path_, ": empty attribute name");
    const auto nul = value.find('\0');
    TRIT_CHECK(nul == std::string::npos, attr_where(name), ": the string holds a NUL byte at ", nul,
               "; HDF5 strings cannot");
    // Fixed-length, so the text sits in the checksummed object header: variable-length strings
    // live in the global heap, which has no checksum, and HDF5 1.10 crashes reading a damaged one.
    Handle type = own(H5Tcopy(H5T_C_S1), H5Tclose, "cannot copy a string type");
    check(H5Tset_size(type.get(), value.size() + 1), "cannot size a string type");
    check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "cannot set string padding");
    check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "cannot set a string character set");
    replace_attr(id_.get(), name, attr_where(name), type.get(), type.get(), value.c_str());
}

void Group::set_attr(const std::string& name, int64_t value) {
    quiet();
    TRIT_CHECK(!name.empty(), file_, ":", path_, ": empty attribute name");
    replace_attr(id_.get(), name, attr_where(name), H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void Group::set_attr(const std::string& name, double value) {
    quiet();
    TRIT_CHECK(!name.empty(), file_, ":", path_, ": empty attribute name");
    replace_attr(id_.get(), name, attr_where(name), H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

bool Group::has_attr(const std::string& name) const {
    quiet();
    TRIT_CHECK(!name.empty(), file_, ":", path_, ": empty attribute name");
    const htri_t exists = H5Aexists(id_.get(), name.c_str());
    if (exists < 0) TRIT_FAIL(attr_where(name), ": cannot look the attribute up", reason());
    return exists > 0;
}

std::vector<std::string> Group::attrs() const {
    quiet();
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        try {
            static_cast<std::vector<std::string>*>(data)->emplace_back(name);
            return 0;
        } catch (...) {
            return -1;  // no exception may cross HDF5's C frames
        }
    };
    check(H5Aiterate2(id_.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names),
          file_ + ":" + path_ + ": cannot list the attributes");
    std::sort(names.begin(), names.end());
    return names;
}

std::pair<Handle, Handle> Group::open_attr(const std::string& name, int cls,
                                           const char* expected) const {
    const std::string at = attr_where(name);
    TRIT_CHECK(has_attr(name), at, ": no such attribute (expected ", expected, ")");
    Handle attr =
        own(H5Aopen(id_.get(), name.c_str(), H5P_DEFAULT), H5Aclose, at + ": cannot open");
    Handle space = own(H5Aget_space(attr.get()), H5Sclose, at + ": cannot read the dataspace");
    Handle type = own(H5Aget_type(attr.get()), H5Tclose, at + ": cannot read the type");
    // int64 and double hold every integer and float of up to 8 bytes.
    TRIT_CHECK(
        H5Tget_class(type.get()) == cls && (cls == H5T_STRING || H5Tget_size(type.get()) <= 8), at,
        ": expected ", expected, " attribute, found ", describe_type(type.get()));
    std::vector<int64_t> shape;
    std::string why;
    const bool ok = read_shape(space.get(), &shape, &why);
    TRIT_CHECK(ok && numel(shape, 1) == 1, at, ": expected a single value, found shape ",
               ok ? shape_text(shape) : why);
    return {std::move(attr), std::move(type)};
}

std::string Group::attr_string(const std::string& name) const {
    quiet();
    auto [attr, type] = open_attr(name, H5T_STRING, "a string");
    const std::string what = attr_where(name) + ": cannot read the attribute";
    if (H5Tis_variable_str(type.get()) > 0) {
        Handle mem = own(H5Tcopy(H5T_C_S1), H5Tclose, "cannot copy a string type");
        check(H5Tset_size(mem.get(), H5T_VARIABLE), "cannot make a variable-length string type");
        check(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), "cannot set a character set");
        char* ptr = nullptr;
        check(H5Aread(attr.get(), mem.get(), &ptr), what);
        std::string out = ptr ? ptr : "";
        H5free_memory(ptr);
        return out;
    }
    std::string out(H5Tget_size(type.get()), '\0');
    check(H5Aread(attr.get(), type.get(), out.data()), what);
    if (H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD) {
        out.erase(out.find_last_not_of(' ') + 1);
    } else {
        out.resize(std::strlen(out.c_str()));  // null-terminated or null-padded
    }
    return out;
}

int64_t Group::attr_int(const std::string& name) const {
    quiet();
    auto [attr, type] = open_attr(name, H5T_INTEGER, "an integer");
    const std::string what = attr_where(name) + ": cannot read the attribute";
    if (H5Tget_sign(type.get()) == H5T_SGN_NONE && H5Tget_size(type.get()) == 8) {
        uint64_t value = 0;
        check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &value), what);
        check_int64_range(name, value <= static_cast<uint64_t>(INT64_MAX));
        return static_cast<int64_t>(value);
    }
    int64_t value = 0;
    check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), what);
    return value;
}

double Group::attr_double(const std::string& name) const {
    quiet();
    auto [attr, type] = open_attr(name, H5T_FLOAT, "a float");
    double value = 0;
    check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value),
          attr_where(name) + ": cannot read the attribute");
    return value;
}

// ---- Group: datasets ----

void Group::write(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                  const void* data) {
    quiet();
    check_name(name);
    TRIT_CHECK(valid_dtype(dtype), where(name), ": invalid DType ", static_cast<int>(dtype));
    TRIT_CHECK(shape.size() <= H5S_MAX_RANK, where(name), ": rank ", shape.size(),
               " exceeds HDF5's limit of ", H5S_MAX_RANK);
    const int64_t elem = dtype_size(dtype);
    const int64_t n = numel(shape, elem);
    TRIT_CHECK(n >= 0, where(name), ": invalid shape ", shape_text(shape),
               " (negative dimension or too large)");
    TRIT_CHECK(data != nullptr || n == 0, where(name), ": no data for ", n, " elements");
    TRIT_CHECK(!has(name), where(name), ": cannot write dataset: the name exists");

    Handle space;
    if (shape.empty()) {
        space = own(H5Screate(H5S_SCALAR), H5Sclose, "cannot create a dataspace");
    } else {
        const std::vector<hsize_t> dims(shape.begin(), shape.end());
        space = own(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                    where(name) + ": cannot create a dataspace of shape " + shape_text(shape));
    }
    Handle dcpl = own(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "cannot create a property list");
    check(H5Pset_obj_track_times(dcpl.get(), false), "cannot disable timestamps");
    if (n * elem >= kCompressMinBytes) {
        TRIT_CHECK(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0, where(name),
                   ": this HDF5 library has no deflate filter, needed for datasets of >= ",
                   kCompressMinBytes, " bytes");
        const std::vector<hsize_t> chunk = chunk_dims(shape, elem);
        check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()),
              where(name) + ": cannot set chunking");
        check(H5Pset_deflate(dcpl.get(), kDeflateLevel), where(name) + ": cannot set deflate");
        // After deflate, so a damaged chunk is caught before it reaches zlib.
        check(H5Pset_fletcher32(dcpl.get()), where(name) + ": cannot set Fletcher-32");
    }
    Handle file_type = make_type(dtype, /*in_file=*/true);
    Handle mem_type = make_type(dtype, /*in_file=*/false);
    Handle lcpl = link_create_plist();
    Handle dset = own(H5Dcreate2(id_.get(), name.c_str(), file_type.get(), space.get(), lcpl.get(),
                                 dcpl.get(), H5P_DEFAULT),
                      H5Dclose, where(name) + ": cannot create dataset");
    if (n == 0) return;
    if (H5Dwrite(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        const std::string why = reason();
        dset.reset();
        H5Ldelete(id_.get(), name.c_str(), H5P_DEFAULT);  // leave no half-written dataset
        H5Eclear2(H5E_DEFAULT);
        TRIT_FAIL(where(name), ": cannot write dataset", why);
    }
}

DatasetInfo Group::info(const std::string& name) const {
    quiet();
    Handle dset = open_object(name, H5I_DATASET);
    Handle type = own(H5Dget_type(dset.get()), H5Tclose, where(name) + ": cannot read the type");
    Handle space = own(H5Dget_space(dset.get()), H5Sclose, where(name) + ": cannot read the shape");
    DatasetInfo out{};
    TRIT_CHECK(classify(type.get(), &out.dtype), where(name), ": unsupported element type (",
               describe_type(type.get()), ")");
    std::string why;
    TRIT_CHECK(read_shape(space.get(), &out.shape, &why), where(name), ": unsupported shape ", why);
    out.bytes_on_disk = static_cast<int64_t>(H5Dget_storage_size(dset.get()));
    return out;
}

Handle Group::open_checked(const std::string& name, DType expected,
                           const std::vector<int64_t>& expected_shape) const {
    Handle dset = open_object(name, H5I_DATASET);
    Handle type = own(H5Dget_type(dset.get()), H5Tclose, where(name) + ": cannot read the type");
    Handle space = own(H5Dget_space(dset.get()), H5Sclose, where(name) + ": cannot read the shape");
    DType found = DType::kU8;
    const bool type_ok = classify(type.get(), &found);
    std::vector<int64_t> shape;
    std::string why;
    const bool shape_ok = read_shape(space.get(), &shape, &why);
    if (!type_ok || found != expected || !shape_ok || shape != expected_shape) {
        TRIT_FAIL(where(name), ": expected ", dtype_name(expected), " ", shape_text(expected_shape),
                  ", found ",
                  type_ok ? std::string(dtype_name(found))
                          : "unsupported (" + describe_type(type.get()) + ")",
                  " ", shape_ok ? shape_text(shape) : why);
    }
    // A contiguous dataset stores exactly its bytes (or none before it is written), a compact
    // one always exactly. Checked because a damaged layout in a file without metadata checksums
    // (HDF5's default format) makes HDF5 1.10 read past its buffers.
    Handle dcpl = own(H5Dget_create_plist(dset.get()), H5Pclose,
                      where(name) + ": cannot read the storage layout");
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) {
        const auto stored = static_cast<int64_t>(H5Dget_storage_size(dset.get()));
        const int64_t want = numel(shape, 1) * static_cast<int64_t>(H5Tget_size(type.get()));
        TRIT_CHECK(stored == want || (stored == 0 && layout == H5D_CONTIGUOUS), where(name),
                   ": corrupt dataset: ", stored, " bytes stored for ", want, " bytes of ",
                   dtype_name(found), " ", shape_text(shape));
    }
    return dset;
}

void Group::read(const std::string& name, DType expected,
                 const std::vector<int64_t>& expected_shape, void* out) const {
    quiet();
    Handle dset = open_checked(name, expected, expected_shape);
    if (numel(expected_shape, dtype_size(expected)) == 0) return;
    TRIT_CHECK(out != nullptr, where(name), ": null output buffer");
    Handle mem_type = make_type(expected, /*in_file=*/false);
    check(H5Dread(dset.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
          where(name) + ": cannot read the data");
}

std::vector<uint8_t> Group::read_bytes(const std::string& name, DType expected,
                                       const std::vector<int64_t>& expected_shape) const {
    quiet();
    open_checked(name, expected, expected_shape);  // before allocating what the caller expects
    const int64_t size = dtype_size(expected);
    const int64_t bytes = numel(expected_shape, size) * size;
    std::vector<uint8_t> out;
    try {
        out.resize(static_cast<size_t>(bytes));
    } catch (const std::exception&) {
        TRIT_FAIL(where(name), ": cannot allocate ", bytes, " bytes for ", dtype_name(expected),
                  " ", shape_text(expected_shape));
    }
    read(name, expected, expected_shape, out.data());
    return out;
}

}  // namespace trit::h5
