// trit::h5 and half.h: round trips of every dtype, shape, attribute kind and group nesting; the
// compression rule; every error (missing, foreign, truncated, corrupt files; missing names; wrong
// dtype, shape or attribute type) with its message; fp16/bf16 conversions against exact values.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "exporters/h5.h"
#include "exporters/half.h"

namespace trit::h5 {
namespace {

static_assert(!std::is_copy_constructible_v<File> && std::is_move_constructible_v<File>);
static_assert(!std::is_copy_constructible_v<Group> && std::is_move_constructible_v<Group>);

// The message of the trit::Error that `f` throws (a test failure where it throws none).
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a trit::Error";
    return "";
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    for (auto& b : out)
        b = static_cast<uint8_t>(rng());
    return out;
}

class H5Test : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = fs::make_temp_dir("trit-h5-test"); }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string file(const std::string& name) const { return fs::join(dir_, name); }

    // A small model file: attributes, nested groups, contiguous and compressed datasets.
    std::string write_model(const std::string& name) const {
        const std::string path = file(name);
        File f = File::create(path);
        Group root = f.root();
        root.set_attr("format", "trit");
        root.set_attr("version", int64_t{3});
        Group fc1 = root.create_group("layers").create_group("fc1");
        fc1.set_attr("scale", 0.25);
        const auto codes = random_bytes(256 * 196, 1);
        fc1.write("codes", DType::kU8, {256, 196}, codes.data());
        const std::vector<float> bias = {0.5f, -1.5f, 2.25f};
        fc1.write("bias", DType::kF32, {3}, bias.data());
        std::vector<int8_t> ternary(300 * 400);
        std::mt19937 rng(2);
        for (auto& t : ternary)
            t = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
        fc1.write("ternary", DType::kI8, {300, 400}, ternary.data());
        f.close();
        return path;
    }

    // Opens and reads everything in a file written by write_model: any failure must be an Error.
    static void read_model(const std::string& path) {
        File f = File::open(path);
        Group root = f.root();
        root.attr_string("format");
        root.attr_int("version");
        for (const auto& name : root.children())
            root.has_group(name);
        Group fc1 = root.open_group("layers").open_group("fc1");
        fc1.attr_double("scale");
        fc1.read_bytes("codes", DType::kU8, {256, 196});
        fc1.read_bytes("bias", DType::kF32, {3});
        fc1.read_bytes("ternary", DType::kI8, {300, 400});
    }

    std::string dir_;
};

// ---- round trips ----

TEST(H5DType, NamesAndSizes) {
    const std::vector<std::tuple<DType, const char*, int64_t>> table = {
        {DType::kU8, "uint8", 1},     {DType::kI8, "int8", 1},     {DType::kI32, "int32", 4},
        {DType::kI64, "int64", 8},    {DType::kF32, "float32", 4}, {DType::kF16, "float16", 2},
        {DType::kBF16, "bfloat16", 2}};
    for (const auto& [dtype, name, size] : table) {
        EXPECT_STREQ(dtype_name(dtype), name);
        EXPECT_EQ(dtype_size(dtype), size);
    }
    EXPECT_STREQ(dtype_name(static_cast<DType>(42)), "invalid dtype");
    EXPECT_NE(error_of([] { dtype_size(static_cast<DType>(42)); }).find("invalid"),
              std::string::npos);
}

TEST_F(H5Test, EveryDTypeAndShapeRoundTripsBitExactly) {
    const std::vector<DType> dtypes = {DType::kU8,  DType::kI8,  DType::kI32, DType::kI64,
                                       DType::kF32, DType::kF16, DType::kBF16};
    const std::vector<std::vector<int64_t>> shapes = {{1}, {7}, {3, 5}, {2, 3, 4}, {1, 1, 1}, {}};
    const std::string path = file("dtypes.h5");
    std::vector<std::vector<uint8_t>> written;
    {
        File f = File::create(path);
        Group root = f.root();
        uint32_t seed = 10;
        for (DType dtype : dtypes) {
            for (size_t s = 0; s < shapes.size(); ++s) {
                int64_t n = 1;
                for (int64_t d : shapes[s])
                    n *= d;
                // Random bit patterns: f16/bf16/f32 include NaNs, infs and subnormals.
                written.push_back(random_bytes(n * dtype_size(dtype), seed++));
                root.write(std::string(dtype_name(dtype)) + "_" + std::to_string(s), dtype,
                           shapes[s], written.back().data());
            }
        }
    }
    File f = File::open(path);
    Group root = f.root();
    size_t k = 0;
    for (DType dtype : dtypes) {
        for (size_t s = 0; s < shapes.size(); ++s) {
            const std::string name = std::string(dtype_name(dtype)) + "_" + std::to_string(s);
            const DatasetInfo info = root.info(name);
            EXPECT_EQ(info.dtype, dtype) << name;
            EXPECT_EQ(info.shape, shapes[s]) << name;
            EXPECT_EQ(info.bytes_on_disk, static_cast<int64_t>(written[k].size())) << name;
            EXPECT_EQ(root.read_bytes(name, dtype, shapes[s]), written[k]) << name;
            ++k;
        }
    }
}

TEST_F(H5Test, ZeroLengthDimensionsRoundTrip) {
    const std::string path = file("empty.h5");
    {
        File f = File::create(path);
        f.root().write("a", DType::kF32, {0}, nullptr);
        f.root().write("b", DType::kI8, {4, 0, 3}, nullptr);
    }
    File f = File::open(path);
    EXPECT_EQ(f.root().info("a").shape, (std::vector<int64_t>{0}));
    EXPECT_EQ(f.root().info("b").shape, (std::vector<int64_t>{4, 0, 3}));
    f.root().read("b", DType::kI8, {4, 0, 3}, nullptr);
    EXPECT_TRUE(f.root().read_bytes("a", DType::kF32, {0}).empty());
}

TEST_F(H5Test, AttributesOfEachTypeRoundTrip) {
    const std::string path = file("attrs.h5");
    const std::string utf8 = "tern\xC3\xA4re Gewichte \xE2\x9C\x93";
    {
        File f = File::create(path);
        Group g = f.root().create_group("g");
        g.set_attr("s", utf8);
        g.set_attr("empty", "");
        g.set_attr("min", std::numeric_limits<int64_t>::min());
        g.set_attr("max", std::numeric_limits<int64_t>::max());
        g.set_attr("int", 7);
        g.set_attr("size", size_t{1} << 40);
        g.set_attr("pi", 3.141592653589793);
        g.set_attr("ninf", -std::numeric_limits<double>::infinity());
        g.set_attr("replaced", "first");
        g.set_attr("replaced", 2.5);  // replacing may change the type
        EXPECT_NE(error_of([&] {
                      g.set_attr("huge", std::numeric_limits<uint64_t>::max());
                  }).find("@huge: integer value does not fit in int64"),
                  std::string::npos);
        EXPECT_NE(error_of([&] {
                      g.set_attr("nul", std::string("a\0b", 3));
                  }).find("@nul: the string holds a NUL byte at 1"),
                  std::string::npos);
    }
    File f = File::open(path);
    Group g = f.root().open_group("g");
    EXPECT_EQ(g.attr_string("s"), utf8);
    EXPECT_EQ(g.attr_string("empty"), "");
    EXPECT_EQ(g.attr_int("min"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(g.attr_int("max"), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(g.attr_int("int"), 7);
    EXPECT_EQ(g.attr_int("size"), int64_t{1} << 40);
    EXPECT_EQ(g.attr_double("pi"), 3.141592653589793);
    EXPECT_EQ(g.attr_double("ninf"), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(g.attr_double("replaced"), 2.5);
    EXPECT_TRUE(g.has_attr("s"));
    EXPECT_FALSE(g.has_attr("nope"));
    EXPECT_EQ(g.attrs(), (std::vector<std::string>{"empty", "int", "max", "min", "ninf", "pi",
                                                   "replaced", "s", "size"}));
}

// Attributes as other writers (h5py, h5dump's users) make them: fixed-length strings of each
// padding, narrower integers and floats, big-endian.
TEST_F(H5Test, ReadsForeignAttributeEncodings) {
    const std::string path = file("foreign.h5");
    {
        File f = File::create(path);  // creates the file; attributes below via the raw C API
    }
    const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    auto put = [&](const char* name, hid_t file_type, hid_t mem_type, const void* value) {
        const hid_t a = H5Acreate2(fid, name, file_type, scalar, H5P_DEFAULT, H5P_DEFAULT);
        ASSERT_GE(a, 0);
        ASSERT_GE(H5Awrite(a, mem_type, value), 0);
        H5Aclose(a);
    };
    for (auto [name, pad, cset] : {std::tuple{"nullterm", H5T_STR_NULLTERM, H5T_CSET_ASCII},
                                   std::tuple{"nullpad", H5T_STR_NULLPAD, H5T_CSET_UTF8},
                                   std::tuple{"spacepad", H5T_STR_SPACEPAD, H5T_CSET_ASCII}}) {
        const hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, 8);
        H5Tset_strpad(t, pad);
        H5Tset_cset(t, cset);
        const char* text = pad == H5T_STR_SPACEPAD ? "trit    " : "trit\0\0\0\0";
        put(name, t, t, text);
        H5Tclose(t);
    }
    const hid_t vlen = H5Tcopy(H5T_C_S1);  // h5py's str
    H5Tset_size(vlen, H5T_VARIABLE);
    H5Tset_cset(vlen, H5T_CSET_UTF8);
    const char* text = "tern\xC3\xA4r";
    put("vlen", vlen, vlen, &text);
    H5Tclose(vlen);
    const int16_t i16 = -12345;
    put("i16", H5T_STD_I16BE, H5T_NATIVE_INT16, &i16);
    const uint64_t big = uint64_t{1} << 63;
    put("u64", H5T_STD_U64LE, H5T_NATIVE_UINT64, &big);
    const float f32 = 0.75f;
    put("f32", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &f32);
    const hsize_t three = 3;
    const hid_t vec = H5Screate_simple(1, &three, nullptr);
    const int64_t values[3] = {1, 2, 3};
    const hid_t a = H5Acreate2(fid, "vec", H5T_STD_I64LE, vec, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, values);
    H5Aclose(a);
    H5Sclose(vec);
    H5Sclose(scalar);
    H5Fclose(fid);

    File f = File::open(path);
    Group root = f.root();
    EXPECT_EQ(root.attr_string("nullterm"), "trit");
    EXPECT_EQ(root.attr_string("nullpad"), "trit");
    EXPECT_EQ(root.attr_string("spacepad"), "trit");
    EXPECT_EQ(root.attr_string("vlen"), "tern\xC3\xA4r");
    EXPECT_EQ(error_of([&] { root.attr_int("vlen"); }),
              path + ":/@vlen: expected an integer attribute, found string, variable-length");
    EXPECT_EQ(root.attr_int("i16"), -12345);
    EXPECT_EQ(root.attr_double("f32"), 0.75);
    EXPECT_EQ(error_of([&] { root.attr_int("u64"); }),
              path + ":/@u64: integer value does not fit in int64");
    EXPECT_EQ(error_of([&] { root.attr_int("vec"); }),
              path + ":/@vec: expected a single value, found shape (3)");
}

TEST_F(H5Test, NestedGroupsListSortedAndKnowTheirPaths) {
    const std::string path = file("groups.h5");
    {
        File f = File::create(path);
        Group root = f.root();
        EXPECT_EQ(root.path(), "/");
        Group layers = root.create_group("layers");
        for (const char* name : {"b", "a", "C", "10", "9"})
            layers.create_group(name);
        Group deep = layers.create_group("blocks").create_group("0").create_group("attn");
        EXPECT_EQ(deep.path(), "/layers/blocks/0/attn");
        const int32_t one = 1;
        layers.write("scale", DType::kI32, {1}, &one);
        EXPECT_NE(error_of([&] {
                      layers.create_group("a");
                  }).find(path + ":/layers/a: cannot create group: the name exists"),
                  std::string::npos);
    }
    File f = File::open(path);
    Group layers = f.root().open_group("layers");
    EXPECT_EQ(layers.path(), "/layers");
    EXPECT_EQ(layers.file_path(), path);
    EXPECT_EQ(layers.children(),
              (std::vector<std::string>{"10", "9", "C", "a", "b", "blocks", "scale"}));
    EXPECT_TRUE(layers.has("scale"));
    EXPECT_TRUE(layers.has_dataset("scale"));
    EXPECT_FALSE(layers.has_group("scale"));
    EXPECT_TRUE(layers.has_group("blocks"));
    EXPECT_FALSE(layers.has("nope"));
    EXPECT_FALSE(layers.has_group("nope"));
    EXPECT_EQ(layers.open_group("blocks").open_group("0").open_group("attn").path(),
              "/layers/blocks/0/attn");
    EXPECT_TRUE(layers.open_group("a").children().empty());
}

// ---- the compression rule ----

TEST_F(H5Test, CompressesFromTheThresholdOnAndRoundTrips) {
    struct Case {
        std::vector<int64_t> shape;
        bool compressed;
    };
    const int64_t t = kCompressMinBytes;
    const std::vector<Case> cases = {{{t - 1}, false},
                                     {{t}, true},
                                     {{t / 256, 256}, true},
                                     {{3, 1000, 1500}, true},  // 4.5 MB: several chunks
                                     {{5000, 300}, true}};
    const std::string path = file("compress.h5");
    std::vector<std::vector<uint8_t>> data;
    std::mt19937 rng(3);
    {
        File f = File::create(path);
        for (size_t c = 0; c < cases.size(); ++c) {
            int64_t n = 1;
            for (int64_t d : cases[c].shape)
                n *= d;
            data.emplace_back(n);  // ternary codes {0, 1, 2}: compressible, not trivially
            for (auto& v : data.back())
                v = static_cast<uint8_t>(rng() % 3);
            f.root().write("d" + std::to_string(c), DType::kU8, cases[c].shape, data.back().data());
        }
        // Incompressible data takes the same path and still round-trips.
        const auto noise = random_bytes(1 << 20, 4);
        f.root().write("noise", DType::kU8, {1 << 20}, noise.data());
        data.push_back(noise);
    }
    File f = File::open(path);
    for (size_t c = 0; c < cases.size(); ++c) {
        const std::string name = "d" + std::to_string(c);
        const DatasetInfo info = f.root().info(name);
        const auto raw = static_cast<int64_t>(data[c].size());
        if (cases[c].compressed) {
            EXPECT_LT(info.bytes_on_disk, raw / 2) << name;
        } else {
            EXPECT_EQ(info.bytes_on_disk, raw) << name;
        }
        EXPECT_EQ(f.root().read_bytes(name, DType::kU8, cases[c].shape), data[c]) << name;
    }
    EXPECT_EQ(f.root().read_bytes("noise", DType::kU8, {1 << 20}), data.back());
}

TEST_F(H5Test, SameContentGivesTheSameBytes) {
    const std::string a = write_model("a.h5");
    const std::string b = write_model("b.h5");
    EXPECT_EQ(slurp(a), slurp(b));  // no timestamps in the files
}

// ---- files that cannot be opened ----

TEST_F(H5Test, MissingEmptyForeignAndDirectoryPathsAreNamed) {
    const std::string missing = file("missing.h5");
    EXPECT_EQ(error_of([&] { File::open(missing); }),
              "cannot open HDF5 file '" + missing + "': no such file");
    EXPECT_EQ(error_of([&] { File::open(dir_); }),
              "cannot open HDF5 file '" + dir_ + "': it is a directory");
    const std::string empty = file("empty.h5");
    spit(empty, "");
    EXPECT_EQ(
        error_of([&] { File::open(empty); }),
        "cannot open HDF5 file '" + empty + "': the file is empty (0 bytes), not an HDF5 file");
    const std::string text = file("notes.h5");
    spit(text, "these are not the weights you are looking for\n");
    EXPECT_EQ(error_of([&] { File::open(text); }),
              "cannot open HDF5 file '" + text + "': not an HDF5 file (no HDF5 signature found)");
    const std::string nowhere = file("no/such/dir/model.h5");
    const std::string msg = error_of([&] { File::create(nowhere); });
    EXPECT_NE(msg.find("cannot create HDF5 file '" + nowhere + "': No such file or directory"),
              std::string::npos)
        << msg;
}

TEST_F(H5Test, TruncatedFilesAreReportedAsTruncated) {
    const std::string whole = slurp(write_model("model.h5"));
    const std::string cut = file("cut.h5");
    for (size_t size : {size_t{1}, size_t{5}, size_t{8}, size_t{20}, size_t{47}, size_t{48},
                        size_t{100}, size_t{1000}, whole.size() / 2, whole.size() - 1}) {
        spit(cut, whole.substr(0, size));
        const std::string msg = error_of([&] { read_model(cut); });
        EXPECT_NE(msg.find("cannot open HDF5 file '" + cut + "': the file is truncated"),
                  std::string::npos)
            << "cut at " << size << ": " << msg;
    }
}

TEST_F(H5Test, CorruptFilesAreReportedWithTheirPath) {
    const std::string whole = slurp(write_model("model.h5"));
    const std::string bad = file("bad.h5");
    std::string bytes = whole;
    bytes[1] ^= 0x20;  // "HDF" -> "hDF": the signature is gone
    spit(bad, bytes);
    EXPECT_EQ(error_of([&] { read_model(bad); }),
              "cannot open HDF5 file '" + bad + "': not an HDF5 file (no HDF5 signature found)");
    bytes = whole;
    bytes[30] ^= 0x01;  // inside the superblock's checksummed addresses
    spit(bad, bytes);
    EXPECT_NE(error_of([&] {
                  read_model(bad);
              }).find("cannot open HDF5 file '" + bad + "': the file is corrupt"),
              std::string::npos);
}

// A flipped byte inside a compressed chunk fails its Fletcher-32 check on read.
TEST_F(H5Test, CorruptChunkFailsToReadWithThePath) {
    const std::string path = write_model("model.h5");
    haddr_t addr = 0;
    hsize_t size = 0;
    {
        const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
        const hid_t dset = H5Dopen2(fid, "/layers/fc1/ternary", H5P_DEFAULT);
        ASSERT_GE(dset, 0);
        const hid_t space = H5Dget_space(dset);
        hsize_t offset[2];
        unsigned mask = 0;
        ASSERT_GE(H5Dget_chunk_info(dset, space, 0, offset, &mask, &addr, &size), 0);
        H5Sclose(space);
        H5Dclose(dset);
        H5Fclose(fid);
    }
    std::string bytes = slurp(path);
    ASSERT_LE(addr + size, bytes.size());
    bytes[addr + size / 2] ^= 0x10;
    spit(path, bytes);
    File f = File::open(path);
    Group fc1 = f.root().open_group("layers").open_group("fc1");
    EXPECT_EQ(fc1.read_bytes("codes", DType::kU8, {256, 196}).size(), 256u * 196u);  // intact
    const std::string msg = error_of([&] { fc1.read_bytes("ternary", DType::kI8, {300, 400}); });
    EXPECT_NE(msg.find(path + ":/layers/fc1/ternary: cannot read the data (HDF5: "),
              std::string::npos)
        << msg;
}

// Byte flips anywhere in the file, from a fixed seed: every outcome is a clean read or a
// trit::Error, never a crash or another exception. (Flips in contiguous raw data go unnoticed:
// only compressed chunks carry checksums.)
TEST_F(H5Test, ByteFlipsNeverCrash) {
    const std::string whole = slurp(write_model("model.h5"));
    const std::string bad = file("flipped.h5");
    std::mt19937 rng(5);
    int errors = 0;
    for (int trial = 0; trial < 300; ++trial) {
        std::string bytes = whole;
        // Half the flips in the first 4 KiB, where most metadata lives.
        const size_t at = trial % 2 ? rng() % 4096 : rng() % bytes.size();
        bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
        spit(bad, bytes);
        try {
            read_model(bad);
        } catch (const Error& e) {
            ++errors;
            EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        }
    }
    EXPECT_GT(errors, 0);
}

// ---- names, dtypes, shapes and attribute types that do not match ----

TEST_F(H5Test, MismatchesNameTheInFilePathAndTheFacts) {
    const std::string path = write_model("model.h5");
    const std::string p = path + ":/layers/fc1";
    File f = File::open(path);
    Group layers = f.root().open_group("layers");
    Group fc1 = layers.open_group("fc1");
    std::vector<uint8_t> buf(256 * 196);
    EXPECT_EQ(error_of([&] { layers.open_group("fc9"); }), path + ":/layers/fc9: no such group");
    EXPECT_EQ(error_of([&] { fc1.open_group("codes"); }),
              p + "/codes: expected a group, found a dataset");
    EXPECT_EQ(error_of([&] { fc1.read("nope", DType::kU8, {1}, buf.data()); }),
              p + "/nope: no such dataset");
    EXPECT_EQ(error_of([&] { layers.info("fc1"); }),
              path + ":/layers/fc1: expected a dataset, found a group");
    EXPECT_EQ(error_of([&] {
                  fc1.read("ternary", DType::kU8, {300, 400}, buf.data());
              }),
              p + "/ternary: expected uint8 (300, 400), found int8 (300, 400)");
    EXPECT_EQ(error_of([&] {
                  fc1.read("codes", DType::kU8, {196, 256}, buf.data());
              }),
              p + "/codes: expected uint8 (196, 256), found uint8 (256, 196)");
    EXPECT_EQ(error_of([&] {
                  fc1.read_bytes("bias", DType::kF32, {1, 3});
              }),
              p + "/bias: expected float32 (1, 3), found float32 (3)");
    EXPECT_EQ(error_of([&] { fc1.read_bytes("bias", DType::kF16, {3}); }),
              p + "/bias: expected float16 (3), found float32 (3)");
    EXPECT_EQ(error_of([&] { fc1.attr_int("missing"); }),
              p + "@missing: no such attribute (expected an integer)");
    EXPECT_EQ(error_of([&] { fc1.attr_int("scale"); }),
              p + "@scale: expected an integer attribute, found float, 8 bytes");
    EXPECT_EQ(error_of([&] { f.root().attr_double("version"); }),
              path + ":/@version: expected a float attribute, found signed integer, 8 bytes");
    EXPECT_EQ(error_of([&] { f.root().attr_int("format"); }),
              path + ":/@format: expected an integer attribute, found string, 5 bytes");
    EXPECT_EQ(error_of([&] { fc1.attr_string("scale"); }),
              p + "@scale: expected a string attribute, found float, 8 bytes");
    for (const char* name : {"", ".", "a/b"}) {
        EXPECT_NE(error_of([&] { fc1.has(name); }).find(p + ": invalid name '" + name + "'"),
                  std::string::npos);
    }
    // Writing into a read-only file fails with the path, not a crash.
    EXPECT_NE(error_of([&] { fc1.create_group("new"); }).find(p + "/new: cannot create group"),
              std::string::npos);
}

// The message of the API contract, word for word.
TEST_F(H5Test, WrongDtypeMessageIsExact) {
    const std::string path = file("model.h5");
    {
        File f = File::create(path);
        const auto codes = random_bytes(256 * 196, 6);
        f.root().create_group("layers").create_group("fc1").write("codes", DType::kI8, {256, 196},
                                                                  codes.data());
    }
    File f = File::open(path);
    std::vector<uint8_t> out(256 * 196);
    EXPECT_EQ(error_of([&] {
                  f.root().open_group("layers").open_group("fc1").read("codes", DType::kU8,
                                                                       {256, 196}, out.data());
              }),
              path + ":/layers/fc1/codes: expected uint8 (256, 196), found int8 (256, 196)");
}

TEST_F(H5Test, WritesThatCannotBeHonouredAreRefused) {
    File f = File::create(file("w.h5"));
    Group root = f.root();
    const float x = 1;
    root.write("x", DType::kF32, {1}, &x);
    EXPECT_NE(error_of([&] {
                  root.write("x", DType::kF32, {1}, &x);
              }).find(":/x: cannot write dataset: the name exists"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  root.write("y", DType::kF32, {2, -1}, &x);
              }).find(":/y: invalid shape (2, -1)"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  root.write("z", DType::kF32, {2}, nullptr);
              }).find(":/z: no data for 2 elements"),
              std::string::npos);
    f.close();
    EXPECT_NE(error_of([&] { f.root(); }).find("is closed"), std::string::npos);
}

// Types are recognised by layout, not identity: big-endian f16 from another writer reads as
// kF16 (HDF5 swaps the bytes); a float64 dataset is named as unsupported.
TEST_F(H5Test, RecognisesTypesByLayout) {
    const std::string path = file("types.h5");
    { File::create(path); }
    const hid_t fid = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(fid, 0);
    const hsize_t two = 2;
    const hid_t space = H5Screate_simple(1, &two, nullptr);
    const hid_t f16be = H5Tcopy(H5T_IEEE_F32BE);
    H5Tset_fields(f16be, 15, 10, 5, 0, 10);
    H5Tset_size(f16be, 2);
    H5Tset_ebias(f16be, 15);
    const uint8_t be_bits[4] = {0x3C, 0x00, 0xC0, 0x00};  // 1.0, -2.0 big-endian
    hid_t d = H5Dcreate2(fid, "f16be", f16be, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, f16be, H5S_ALL, H5S_ALL, H5P_DEFAULT, be_bits);
    H5Dclose(d);
    const double f64[2] = {1, 2};
    d = H5Dcreate2(fid, "f64", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, f64);
    H5Dclose(d);
    H5Tclose(f16be);
    H5Sclose(space);
    H5Fclose(fid);

    File f = File::open(path);
    EXPECT_EQ(f.root().info("f16be").dtype, DType::kF16);
    std::vector<uint16_t> bits(2);
    f.root().read("f16be", DType::kF16, {2}, bits.data());
    EXPECT_EQ(bits, (std::vector<uint16_t>{0x3C00, 0xC000}));
    EXPECT_EQ(error_of([&] { f.root().info("f64"); }),
              path + ":/f64: unsupported element type (float, 8 bytes)");
    EXPECT_EQ(error_of([&] { f.root().read_bytes("f64", DType::kF32, {2}); }),
              path + ":/f64: expected float32 (2), found unsupported (float, 8 bytes) (2)");
}

}  // namespace
}  // namespace trit::h5

// ---- half.h ----

namespace trit {
namespace {

static_assert(f32_bits_to_f16_bits(0x3F800000u) == 0x3C00);  // usable in constant expressions
static_assert(f32_bits_to_bf16_bits(0x3F800000u) == 0x3F80);

uint16_t f16(float f) {
    return f32_to_f16_bits(f);
}

TEST(Half, F16ExactValues) {
    EXPECT_EQ(f16(1.0f), 0x3C00);
    EXPECT_EQ(f16(-2.0f), 0xC000);
    EXPECT_EQ(f16(65504.0f), 0x7BFF);  // largest finite
    EXPECT_EQ(f16(65519.0f), 0x7BFF);  // below the midpoint to 65536
    EXPECT_EQ(f16(65520.0f), 0x7C00);  // the midpoint ties up to inf
    EXPECT_EQ(f16(1e10f), 0x7C00);     // overflow
    EXPECT_EQ(f16(-INFINITY), 0xFC00);
    EXPECT_EQ(f16(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
    EXPECT_EQ(f16(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
    EXPECT_EQ(f16(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
    EXPECT_EQ(f16(std::ldexp(1023.5f, -24)), 0x0400);  // tie: carries into the normals
    EXPECT_EQ(f16(std::ldexp(1.0f, -25)), 0x0000);     // tie between 0 and 2^-24: even
    EXPECT_EQ(f16(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
    EXPECT_EQ(f16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 units: even
    EXPECT_EQ(f16(std::ldexp(5.0f, -25)), 0x0002);  // tie between 2 and 3 units: even
    EXPECT_EQ(f16(std::ldexp(1.0f, -30)), 0x0000);
    EXPECT_EQ(f16(1.0f / 3.0f), 0x3555);                   // 0.333251953125
    EXPECT_EQ(f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: stays on even 0x3C00
    EXPECT_EQ(f16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie: up to even 0x3C02
    EXPECT_EQ(f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
    EXPECT_EQ(f16(0.0f), 0x0000);
    EXPECT_EQ(f16(-0.0f), 0x8000);
    const uint16_t nan = f16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x7C00, 0x7C00);
    EXPECT_NE(nan & 0x03FF, 0);
    EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f32_from_bits(0x7F800001u)))));
    EXPECT_EQ(f16_bits_to_f32(0x3555), 0.333251953125f);
    EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f32_bits(f16_bits_to_f32(0x8000)), 0x80000000u);
}

TEST(Half, Bf16ExactValues) {
    EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
    EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
    EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x3F808000u)), 0x3F80);  // tie: stays even
    EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x3F818000u)), 0x3F82);  // tie: up to even
    EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x3F808001u)), 0x3F81);
    EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
    EXPECT_EQ(f32_to_bf16_bits(INFINITY), 0x7F80);
    EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x7FC00000u)), 0x7FC0);
    // A NaN whose payload sits in the dropped bits must not become inf.
    EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(f32_from_bits(0x7F800001u)))));
    EXPECT_EQ(bf16_bits_to_f32(0x3F80), 1.0f);
}

// Every 16-bit pattern survives the trip through float (NaN payloads too, on this code).
TEST(Half, AllPatternsRoundTripThroughFloat) {
    for (uint32_t b = 0; b < 65536; ++b) {
        const auto bits = static_cast<uint16_t>(b);
        const float f = f16_bits_to_f32(bits);
        const bool f16_nan = (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0;
        EXPECT_EQ(std::isnan(f), f16_nan) << std::hex << b;
        if (f16_nan) {
            EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f)))) << std::hex << b;
        } else {
            ASSERT_EQ(f32_to_f16_bits(f), bits) << std::hex << b;
        }
        ASSERT_EQ(f32_to_bf16_bits(bf16_bits_to_f32(bits)), bits) << std::hex << b;
    }
}

// Against the definition: the result is the nearest f16 (ties to the even pattern), for random
// floats over the whole f16 range and beyond.
TEST(Half, F16RoundsToNearestEven) {
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        const float x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                                   static_cast<int>(rng() % 46) - 28);
        const uint16_t h = f32_to_f16_bits(x);
        const double v = f16_bits_to_f32(h);
        if (std::isinf(v)) {
            ASSERT_GE(std::fabs(x), 65520.0) << x;
            continue;
        }
        // The neighbours one ulp away (stepping the magnitude; 0x7C00 is inf = 65536 here).
        for (int step : {-1, 1}) {
            const int mag = (h & 0x7FFF) + step;
            if (mag < 0) continue;
            const double other =
                mag >= 0x7C00 ? 65536.0 : f16_bits_to_f32(static_cast<uint16_t>(mag));
            const double dv = std::fabs(std::fabs(x) - std::fabs(v));
            const double dother = std::fabs(std::fabs(x) - other);
            ASSERT_LE(dv, dother) << x;
            if (dv == dother) {
                ASSERT_EQ(h & 1, 0) << x;  // a tie went to the even pattern
            }
        }
    }
}

}  // namespace
}  // namespace trit
