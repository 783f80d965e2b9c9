// safetensors: writer -> reader round trips (F32 exact; F16/BF16 exact values and rounding equal to
// torch's own conversion), views against copies, golden header bytes, the streaming writer's
// checks, and every malformed-file error, on files written byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "tests/support/error_of.h"

namespace trit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using trit::testing::error_of;
using D = SafetensorsDtype;

static_assert(!std::is_copy_constructible_v<SafetensorsFile> &&
              std::is_move_constructible_v<SafetensorsFile>);

std::string le64(uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i)
        s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    return s;
}

// A file's bytes: header size, header exactly as given (no padding), data.
std::string file_bytes(const std::string& header, const std::string& data = "") {
    return le64(header.size()) + header + data;
}

std::string f32_bytes(std::initializer_list<float> values) {
    std::string s(values.size() * 4, '\0');
    std::memcpy(s.data(), values.begin(), s.size());
    return s;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Bit-exact equality (dtype, shape and bytes), so -0.0 and 0.0 differ.
void expect_same_bits(const torch::Tensor& a, const torch::Tensor& b) {
    ASSERT_EQ(a.scalar_type(), b.scalar_type());
    ASSERT_EQ(a.sizes(), b.sizes());
    const torch::Tensor ac = a.contiguous(), bc = b.contiguous();
    const auto n = static_cast<size_t>(ac.numel() * ac.element_size());
    EXPECT_EQ(std::memcmp(ac.data_ptr(), bc.data_ptr(), n), 0);
}

class SafetensorsTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = fs::make_temp_dir("trit-safetensors-test"); }
    void TearDown() override { fs::remove_tree(dir_); }

    std::string path(const std::string& name) const { return fs::join(dir_, name); }

    std::string put(const std::string& name, const std::string& bytes) const {
        const std::string p = path(name);
        std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
        return p;
    }

    // The error opening a file with these bytes, without the "<path>: " prefix.
    std::string open_error(const std::string& bytes) const {
        const std::string p = put("bad.safetensors", bytes);
        const std::string e = error_of([&] { open_safetensors(p); });
        EXPECT_EQ(e.rfind(p + ": ", 0), 0u) << e;
        return e.substr(std::min(e.size(), p.size() + 2));
    }

    std::string dir_;
};

TEST_F(SafetensorsTest, RoundTripF32) {
    torch::manual_seed(7);
    const torch::Tensor a = torch::randn({3, 5}), b = torch::randn({7}),
                        c = torch::randn({2, 1, 4});
    const std::string p = path("f32.safetensors");
    write_safetensors(p, {{"layer.weight", a}, {"b", b}, {"c", c}}, {}, {{"format", "pt"}});
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_THAT(f.names(), ElementsAre("layer.weight", "b", "c"));
    EXPECT_TRUE(f.has("b"));
    EXPECT_FALSE(f.has("d"));
    EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    const SafetensorsTensorInfo& info = f.info("b");
    EXPECT_EQ(info.dtype, D::F32);
    EXPECT_EQ(info.shape, std::vector<int64_t>{7});
    EXPECT_EQ(info.begin, 60u);
    EXPECT_EQ(info.end, 88u);
    EXPECT_EQ(f.header_size() % 8, 0u);
    EXPECT_EQ(f.data_size(), (15u + 7u + 8u) * 4u);
    expect_same_bits(f.to_tensor("layer.weight"), a);
    expect_same_bits(f.to_tensor("b"), b);
    expect_same_bits(f.to_tensor("c"), c);
    EXPECT_THAT(error_of([&] { f.info("nope"); }),
                HasSubstr("tensor 'nope': expected a tensor of that name, got none (3 tensors"));
}

TEST_F(SafetensorsTest, GoldenBytes) {
    const std::string p = path("golden.safetensors");
    write_safetensors(p, {{"w", torch::tensor({1.0f, -2.5f})}});
    std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    header += "  ";  // 54 bytes, padded with spaces to 56 like the reference writer
    EXPECT_EQ(slurp(p), le64(56) + header + f32_bytes({1.0f, -2.5f}));

    write_safetensors(p, {{"h", torch::tensor({1.0f, -2.0f})}}, {D::BF16}, {{"k", "v\"\n"}});
    header =
        R"({"__metadata__":{"k":"v\"\n"},"h":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
    header.append((8 - header.size() % 8) % 8, ' ');
    EXPECT_EQ(slurp(p), le64(header.size()) + header + std::string("\x80\x3F\x00\xC0", 4));
    EXPECT_EQ(open_safetensors(p).metadata().at("k"), "v\"\n");
}

TEST_F(SafetensorsTest, ReadsReferenceBytes) {
    // The example in the reference implementation's documentation, an I32 tensor.
    const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
    ASSERT_EQ(header.size(), 60u);
    const std::string p = put("ref.safetensors", file_bytes(header, std::string(16, '\0')));
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_EQ(f.info("test").dtype, D::I32);
    EXPECT_EQ(f.info("test").numel(), 4);
    EXPECT_EQ(error_of([&] { f.to_tensor("test"); }),
              p + ": tensor 'test': dtype I32 is not supported for quantization; expected F32, F16 "
                  "or BF16");
    EXPECT_THAT(error_of([&] { f.view("test"); }), HasSubstr("dtype I32 is not supported"));
}

TEST_F(SafetensorsTest, HalfAndBfloatExactValues) {
    std::vector<float> v;
    for (int k = -64; k <= 64; ++k)
        v.push_back(static_cast<float>(k) / 8.0f);
    v.push_back(-0.0f);
    v.push_back(std::numeric_limits<float>::infinity());
    v.push_back(-std::numeric_limits<float>::infinity());
    std::vector<float> h = v, b = v;
    for (const float x : {65504.0f, -65504.0f, std::ldexp(1.0f, -14), std::ldexp(1.0f, -24)})
        h.push_back(x);  // f16 max, min normal, min subnormal
    for (const float x : {std::ldexp(1.0f, 100), std::ldexp(-1.5f, 120), std::ldexp(1.0f, -130)})
        b.push_back(x);  // bf16 has float's exponent range (2^-130 is subnormal)
    const torch::Tensor th = torch::tensor(h), tb = torch::tensor(b);
    const std::string p = path("exact.safetensors");
    write_safetensors(p, {{"h", th}, {"b", tb}}, {D::F16, D::BF16});
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_EQ(f.info("h").dtype, D::F16);
    EXPECT_EQ(f.info("b").dtype, D::BF16);
    expect_same_bits(f.to_tensor("h"), th);
    expect_same_bits(f.to_tensor("b"), tb);
}

TEST_F(SafetensorsTest, RoundingMatchesTorch) {
    torch::manual_seed(11);
    // Normal values over many binades, plus ties and overflow written out.
    torch::Tensor x = torch::cat({torch::randn({2048}) * 1e-3, torch::randn({2048}),
                                  torch::randn({2048}) * 3e4, torch::rand({1024}) * 1e-6});
    const float ties[] = {1.0f + std::ldexp(1.0f, -11),
                          1.0f + 3 * std::ldexp(1.0f, -11),
                          1.0f + std::ldexp(1.0f, -8),
                          1.0f + 3 * std::ldexp(1.0f, -8),
                          65519.0f,
                          65520.0f,
                          1e5f,
                          std::numeric_limits<float>::max()};
    x = torch::cat({x, torch::tensor(std::vector<float>(std::begin(ties), std::end(ties)))});
    x = x.reshape({8, -1});
    const std::string p = path("round.safetensors");
    write_safetensors(p, {{"h", x}, {"b", x}}, {D::F16, D::BF16});
    const SafetensorsFile f = open_safetensors(p);
    expect_same_bits(f.view("h"), x.to(torch::kFloat16));
    expect_same_bits(f.view("b"), x.to(torch::kBFloat16));
    expect_same_bits(f.to_tensor("h"), x.to(torch::kFloat16).to(torch::kFloat32));
    expect_same_bits(f.to_tensor("b"), x.to(torch::kBFloat16).to(torch::kFloat32));
    // Ties go to the even neighbour; past the largest finite value is inf.
    const torch::Tensor h = f.to_tensor("h").reshape({-1}), b = f.to_tensor("b").reshape({-1});
    const int64_t t = x.numel() - 8;
    EXPECT_EQ(h[t].item<float>(), 1.0f);
    EXPECT_EQ(h[t + 1].item<float>(), 1.0f + std::ldexp(1.0f, -9));
    EXPECT_EQ(b[t + 2].item<float>(), 1.0f);
    EXPECT_EQ(b[t + 3].item<float>(), 1.0f + std::ldexp(1.0f, -6));
    EXPECT_EQ(h[t + 4].item<float>(), 65504.0f);
    EXPECT_TRUE(std::isinf(h[t + 5].item<float>()));
    EXPECT_TRUE(std::isinf(b[t + 7].item<float>()));
}

TEST_F(SafetensorsTest, NanStaysNan) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::string p = path("nan.safetensors");
    write_safetensors(p, {{"a", torch::tensor({nan})}, {"b", torch::tensor({nan})}},
                      {D::F16, D::BF16});
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_TRUE(std::isnan(f.to_tensor("a").item<float>()));
    EXPECT_TRUE(std::isnan(f.to_tensor("b").item<float>()));
}

TEST_F(SafetensorsTest, ViewAgainstCopy) {
    torch::manual_seed(3);
    const torch::Tensor a = torch::randn({4, 6}), b = torch::randn({5}), c = torch::randn({3, 3});
    const std::string p = path("view.safetensors");
    // Wider dtypes first keep every tensor aligned (the reference writer orders them so too).
    write_safetensors(p, {{"a", a}, {"b", b}, {"c", c}}, {D::F32, D::BF16, D::F16});
    torch::Tensor kept;
    {
        SafetensorsFile f = open_safetensors(p);
        for (const char* name : {"a", "b", "c"}) {
            SCOPED_TRACE(name);
            EXPECT_TRUE(f.view_is_zero_copy(name));
            const torch::Tensor v = f.view(name);
            EXPECT_EQ(static_cast<const void*>(v.data_ptr()),
                      static_cast<const void*>(f.data(name)));
            expect_same_bits(v.to(torch::kFloat32), f.to_tensor(name));
        }
        EXPECT_EQ(f.view("a").scalar_type(), torch::kFloat32);
        EXPECT_EQ(f.view("b").scalar_type(), torch::kBFloat16);
        EXPECT_EQ(f.view("c").scalar_type(), torch::kFloat16);
        // to_tensor owns its memory.
        EXPECT_NE(static_cast<const void*>(f.to_tensor("a").data_ptr()),
                  static_cast<const void*>(f.data("a")));
        SafetensorsFile moved = std::move(f);
        kept = moved.view("a");
    }
    // The view holds the mapping: still readable after the file object is gone.
    expect_same_bits(kept, a);
}

TEST_F(SafetensorsTest, MisalignedViewCopies) {
    // F16 [3] (6 bytes) then F32 [2] at buffer offset 6: not 4-aligned in memory.
    const std::string p = path("misaligned.safetensors");
    write_safetensors(
        p, {{"h", torch::tensor({1.0f, 2.0f, 3.0f})}, {"f", torch::tensor({4.5f, -6.0f})}},
        {D::F16, D::F32});
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_TRUE(f.view_is_zero_copy("h"));
    EXPECT_FALSE(f.view_is_zero_copy("f"));
    const torch::Tensor v = f.view("f");
    EXPECT_NE(static_cast<const void*>(v.data_ptr()), static_cast<const void*>(f.data("f")));
    expect_same_bits(v, torch::tensor({4.5f, -6.0f}));
    expect_same_bits(f.to_tensor("f"), torch::tensor({4.5f, -6.0f}));
}

TEST_F(SafetensorsTest, EmptyAndScalarTensors) {
    const std::string p = path("shapes.safetensors");
    write_safetensors(p,
                      {{"empty_h", torch::empty({2, 0})},
                       {"empty", torch::empty({0, 3})},
                       {"scalar", torch::tensor(2.5f)}},
                      {D::F16, D::F32, D::F32});
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_THAT(f.names(), ElementsAre("empty_h", "empty", "scalar"));  // ties in header order
    EXPECT_EQ(f.info("empty").shape, (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(f.info("empty").bytes(), 0u);
    EXPECT_EQ(f.info("scalar").shape, std::vector<int64_t>{});
    EXPECT_EQ(f.info("scalar").numel(), 1);
    EXPECT_EQ(f.to_tensor("empty").sizes(), torch::IntArrayRef({0, 3}));
    EXPECT_EQ(f.view("empty_h").sizes(), torch::IntArrayRef({2, 0}));
    EXPECT_EQ(f.to_tensor("empty_h").sizes(), torch::IntArrayRef({2, 0}));
    const torch::Tensor s = f.to_tensor("scalar");
    EXPECT_EQ(s.dim(), 0);
    EXPECT_EQ(s.item<float>(), 2.5f);
    EXPECT_EQ(f.view("scalar").item<float>(), 2.5f);

    const std::string none = path("none.safetensors");
    write_safetensors(none, {});
    EXPECT_EQ(slurp(none), le64(8) + "{}      ");
    EXPECT_TRUE(open_safetensors(none).names().empty());
}

TEST_F(SafetensorsTest, NamesInOffsetOrder) {
    const std::string header =
        R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
        R"( "a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} )";  // 109 bytes
    const std::string p = put("order.safetensors", file_bytes(header, f32_bytes({1.0f, 2.0f})));
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_THAT(f.names(), ElementsAre("a", "b"));
    EXPECT_EQ(f.to_tensor("a").item<float>(), 1.0f);
    EXPECT_EQ(f.to_tensor("b").item<float>(), 2.0f);
    // Unpadded header of odd length: views copy, values are right.
    EXPECT_FALSE(f.view_is_zero_copy("a"));
    EXPECT_EQ(f.view("b").item<float>(), 2.0f);
}

TEST_F(SafetensorsTest, StreamingWriter) {
    torch::manual_seed(5);
    const torch::Tensor a = torch::randn({3, 5}), b = torch::randn({7});
    const std::string p = path("stream.safetensors");
    {
        SafetensorsWriter w(
            p, {{"a", D::F32, {3, 5}}, {"e", D::F16, {0}}, {"b", D::BF16, {7}}, {"s", D::F16, {}}});
        const torch::Tensor flat = a.reshape({-1});
        w.write("a", flat.slice(0, 0, 4));
        w.write("a", flat.data_ptr<float>() + 4, 4);
        w.write("a", flat.slice(0, 8, 15).to(torch::kFloat64));  // any floating dtype
        w.write("b", b);                                         // skips the empty "e"
        const float s = 0.75f;
        w.write("s", &s, 1);
        EXPECT_FALSE(fs::exists(p));  // written to <path>.tmp until close
        w.close();
    }
    EXPECT_FALSE(fs::exists(p + ".tmp"));
    const SafetensorsFile f = open_safetensors(p);
    EXPECT_THAT(f.names(), ElementsAre("a", "e", "b", "s"));
    expect_same_bits(f.to_tensor("a"), a);
    expect_same_bits(f.view("b"), b.to(torch::kBFloat16));
    EXPECT_EQ(f.to_tensor("s").item<float>(), 0.75f);
}

TEST_F(SafetensorsTest, StreamingWriterErrors) {
    const std::string p = path("w.safetensors");
    const std::vector<SafetensorsEntry> decl = {{"a", D::F32, {2, 2}}, {"b", D::F16, {3}}};
    const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    {
        SafetensorsWriter w(p, decl);
        w.write("a", data, 2);
        EXPECT_EQ(error_of([&] { w.write("b", data, 1); }),
                  p + ": tensor 'b': expected the rest of tensor 'a' first (2 of 4 elements "
                      "written), got data for 'b'");
        EXPECT_EQ(error_of([&] { w.write("a", data, 3); }),
                  p + ": tensor 'a': expected 4 elements, got 5 or more");
        EXPECT_EQ(error_of([&] { w.write("c", data, 1); }),
                  p + ": tensor 'c': expected one of the declared tensors, got data for an "
                      "undeclared one");
        w.write("a", data, 2);
        w.write("b", data, 1);
        EXPECT_EQ(error_of([&] { w.write("a", data, 1); }),
                  p + ": tensor 'a': expected data in declaration order, got more after tensor 'b' "
                      "was started");
        EXPECT_EQ(error_of([&] { w.close(); }),
                  p + ": tensor 'b': expected 3 elements, got 1 at close");
        EXPECT_THAT(error_of([&] {
                        w.write("b", torch::tensor({1, 2}));
                    }),
                    HasSubstr("expected a floating-point chunk, got Long"));
    }
    // Abandoned before close: neither the file nor the temporary remains.
    EXPECT_FALSE(fs::exists(p));
    EXPECT_FALSE(fs::exists(p + ".tmp"));

    EXPECT_EQ(error_of([&] {
                  SafetensorsWriter(p, {{"x", D::I64, {1}}});
              }),
              p + ": tensor 'x': the writer takes F32, F16 or BF16, got I64");
    EXPECT_EQ(error_of([&] {
                  SafetensorsWriter(p, {{"x", D::F32, {1}}, {"x", D::F32, {1}}});
              }),
              p + ": tensor 'x': expected unique names, got it twice");
    EXPECT_EQ(error_of([&] {
                  SafetensorsWriter(p, {{"__metadata__", D::F32, {1}}});
              }),
              p + ": tensor '__metadata__': expected a tensor name, got the reserved key");
    EXPECT_EQ(error_of([&] {
                  SafetensorsWriter(p, {{"x", D::F32, {2, -1}}});
              }),
              p + ": tensor 'x': expected non-negative dimensions, got shape [2, -1]");
    EXPECT_THAT(error_of([&] {
                    write_safetensors(p, {{"x", torch::ones({1})}}, {D::F32, D::F16});
                }),
                HasSubstr("expected 1 dtypes (one per tensor) or none, got 2"));
    EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(SafetensorsTest, OpenErrors) {
    EXPECT_EQ(error_of([&] { open_safetensors(path("missing")); }),
              path("missing") + ": cannot open the safetensors file: no such file");
    EXPECT_EQ(error_of([&] { open_safetensors(dir_); }),
              dir_ + ": expected a regular file, got a directory");
}

struct Malformed {
    const char* what;
    std::string bytes;
    std::string error;  // after "<path>: "
};

TEST_F(SafetensorsTest, MalformedFiles) {
    const std::string t4 = R"("dtype":"F32","shape":[1])";  // one F32 element: 4 bytes
    const std::string d8 = f32_bytes({1.0f, 2.0f});
    const Malformed cases[] = {
        {"truncated", std::string("\x05\x00\x00\x00\x00", 5),
         "expected at least 8 bytes (the header size), got a file of 5 bytes (truncated)"},
        {"empty file", "",
         "expected at least 8 bytes (the header size), got a file of 0 bytes (truncated)"},
        {"header size past the end", le64(100) + "{}",
         "header size: expected at most 2 bytes (the rest of the file), got 100 (past the end of "
         "the file)"},
        {"header size absurd", le64(200000000) + "{}",
         "header size: expected at most 100000000 bytes, got 200000000"},
        {"header size 2^64 - 1", le64(~uint64_t{0}),
         "header size: expected at most 100000000 bytes, got 18446744073709551615"},
        {"bad JSON", file_bytes(R"({"a":)"),
         "header: byte 5 (line 1, column 6): expected a JSON value, got the end of the input"},
        {"empty header", file_bytes(""),
         "header: byte 0 (line 1, column 1): expected a JSON value, got the end of the input"},
        {"not UTF-8", file_bytes("{\"\xFF\":1}"),
         "header: byte 2 (line 1, column 3): expected valid UTF-8 in a string, got byte 0xFF"},
        {"not an object", file_bytes("[]"),
         "header: expected a JSON object, got an array of length 0"},
        {"duplicate key",
         file_bytes(R"({"a":{)" + t4 + R"(,"data_offsets":[0,4]},"a":{)" + t4 +
                        R"(,"data_offsets":[4,8]}})",
                    d8),
         "header: byte 54 (line 1, column 55): expected unique keys in an object, got \"a\" again "
         "(first at byte 1)"},
        {"entry not an object", file_bytes(R"({"w":[1]})"),
         "tensor 'w': expected an object {\"dtype\", \"shape\", \"data_offsets\"}, got an array of "
         "length 1"},
        {"missing key", file_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,0]}})"),
         "tensor 'w': expected a key 'shape', got none"},
        {"extra key",
         file_bytes(R"({"w":{)" + t4 + R"(,"data_offsets":[0,4],"x":1}})", d8.substr(4)),
         "tensor 'w': expected only the keys dtype, shape and data_offsets, got the key \"x\""},
        {"unknown dtype",
         file_bytes(R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})", d8.substr(4)),
         "tensor 'w': dtype: expected one of BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, "
         "F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64, got \"F12\""},
        {"dtype not a string", file_bytes(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})"),
         "tensor 'w': dtype: expected a string, got 32"},
        {"shape not an array",
         file_bytes(R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})"),
         "tensor 'w': shape: expected an array of non-negative integers, got 4"},
        {"negative dimension",
         file_bytes(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]}})"),
         "tensor 'w': shape[1]: expected a non-negative integer below 2^63, got -1"},
        {"fractional dimension",
         file_bytes(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"),
         "tensor 'w': shape[0]: expected a non-negative integer below 2^63, got 1.5"},
        {"elements overflow",
         file_bytes(
             R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})"),
         "tensor 'w': shape [4294967296, 4294967296]: expected at most 2^63 - 1 elements, got an "
         "overflow"},
        {"bytes overflow",
         file_bytes(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})"),
         "tensor 'w': shape [4611686018427387904] of F64: expected a size below 2^64 bits, got an "
         "overflow"},
        {"sub-byte size", file_bytes(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})"),
         "tensor 'w': shape [3] of F4: expected a whole number of bytes, got 12 bits"},
        {"offsets not a pair", file_bytes(R"({"w":{)" + t4 + R"(,"data_offsets":[0,4,8]}})"),
         "tensor 'w': data_offsets: expected [begin, end], got an array of length 3"},
        {"negative offset", file_bytes(R"({"w":{)" + t4 + R"(,"data_offsets":[-4,0]}})"),
         "tensor 'w': data_offsets[0]: expected an integer in [0, 2^64 - 1], got -4"},
        {"begin after end", file_bytes(R"({"w":{)" + t4 + R"(,"data_offsets":[8,4]}})", d8),
         "tensor 'w': data_offsets: expected [begin, end] with begin <= end, got [8, 4]"},
        {"offsets past the end",
         file_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d8),
         "tensor 'w': data_offsets [0, 16]: expected an end within the data buffer (8 bytes), got "
         "offsets past the end (end 16)"},
        {"offset past 2^64",
         file_bytes(R"({"w":{)" + t4 + R"(,"data_offsets":[0,18446744073709551616]}})"),
         "tensor 'w': data_offsets[1]: expected an integer in [0, 2^64 - 1], got "
         "18446744073709551616"},
        {"length mismatch",
         file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8),
         "tensor 'w': data_offsets [0, 8]: expected 12 bytes (3 elements of F32, shape [3]), got 8 "
         "bytes"},
        {"overlap",
         file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    d8 + f32_bytes({3.0f})),
         "tensor 'b': expected its data to start at byte 8, where tensor 'a' [0, 8] ends, got "
         "data_offsets [4, 12], which overlap tensor 'a'"},
        {"gap",
         file_bytes(R"({"a":{)" + t4 + R"(,"data_offsets":[0,4]},"b":{)" + t4 +
                        R"(,"data_offsets":[8,12]}})",
                    d8 + f32_bytes({3.0f})),
         "tensor 'b': expected its data to start at byte 4, where tensor 'a' [0, 4] ends, got "
         "data_offsets [8, 12]: a gap of 4 bytes"},
        {"gap at the start", file_bytes(R"({"a":{)" + t4 + R"(,"data_offsets":[4,8]}})", d8),
         "tensor 'a': expected its data to start at byte 0, the start of the data buffer, got "
         "data_offsets [4, 8]: a gap of 4 bytes"},
        {"trailing bytes", file_bytes(R"({"a":{)" + t4 + R"(,"data_offsets":[0,4]}})", d8),
         "expected the tensors to cover the data buffer (8 bytes), got 4 bytes after the end of "
         "the last tensor 'a'"},
        {"data without tensors", file_bytes("{}", d8),
         "expected the tensors to cover the data buffer (8 bytes), got 8 bytes after the end of "
         "the header (no tensors)"},
        {"metadata not an object", file_bytes(R"({"__metadata__":["a"]})"),
         "__metadata__: expected an object of strings, got an array of length 1"},
        {"non-string metadata value", file_bytes(R"({"__metadata__":{"format":"pt","k":1}})"),
         "__metadata__ 'k': expected a string, got 1"},
    };
    for (const Malformed& c : cases) {
        SCOPED_TRACE(c.what);
        EXPECT_EQ(open_error(c.bytes), c.error);
    }
}

TEST_F(SafetensorsTest, MutatedFilesFailCleanly) {
    // Random byte flips, truncations and extensions of a valid file (fixed seed): each one opens
    // or throws trit::Error; nothing else escapes and nothing crashes.
    const std::string p = path("base.safetensors");
    write_safetensors(
        p, {{"a", torch::arange(6, torch::kFloat32).reshape({2, 3})}, {"b", torch::ones({4})}},
        {D::F32, D::F16}, {{"k", "v"}});
    const std::string base = slurp(p);
    std::mt19937 rng(1234);
    int opened = 0, failed = 0;
    for (int i = 0; i < 200; ++i) {
        std::string bytes = base;
        const uint32_t kind = rng() % 3;
        if (kind == 0) {
            for (uint32_t k = 0, n = 1 + rng() % 3; k < n; ++k)
                bytes[rng() % bytes.size()] = static_cast<char>(rng());
        } else if (kind == 1) {
            bytes.resize(rng() % bytes.size());
        } else {
            bytes.append(1 + rng() % 9, static_cast<char>(rng()));
        }
        const std::string m = put("mutated.safetensors", bytes);
        try {
            const SafetensorsFile f = open_safetensors(m);
            for (const std::string& name : f.names()) {
                if (f.info(name).dtype == D::F32 || f.info(name).dtype == D::F16) f.to_tensor(name);
            }
            ++opened;
        } catch (const Error&) {
            ++failed;
        }
    }
    EXPECT_GT(opened, 0);  // flips inside the data still open
    EXPECT_GT(failed, 0);
}

TEST_F(SafetensorsTest, AcceptsPaddingAndWhitespace) {
    // Spaces after the JSON (the reference writer's padding) and whitespace inside are fine.
    const std::string header =
        "{ \"w\" : {\"dtype\": \"F32\", \"shape\": [1],\n \"data_offsets\": [0, 4]} }     ";
    const std::string p = put("pad.safetensors", file_bytes(header, f32_bytes({9.0f})));
    EXPECT_EQ(open_safetensors(p).to_tensor("w").item<float>(), 9.0f);
}

}  // namespace
}  // namespace trit
