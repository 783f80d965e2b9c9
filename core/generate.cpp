// Text generation with the byte-level Gpt: see generate.h.
#include "core/generate.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/fortunes.h"
#include "core/vit.h"

namespace trit {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::Device device_of(torch::nn::Module& model) {
    const auto params = model.parameters();
    return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

// (1, n) int64 tokens on `device`.
torch::Tensor to_tokens(const uint8_t* bytes, int64_t n, const torch::Device& device) {
    torch::Tensor t = torch::empty({1, n}, torch::kLong);
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
        p[i] = bytes[i];
    return t.to(device);
}

// The last position's logits (B = 1) as 256 floats on the CPU.
std::vector<float> last_logits(const torch::Tensor& logits) {
    const torch::Tensor row = logits.select(/*dim=*/0, 0)
                                  .select(/*dim=*/0, -1)
                                  .to(torch::kCPU, torch::kFloat)
                                  .contiguous();
    TRIT_CHECK(row.numel() == kByteVocab, "generate: expected ", kByteVocab,
               " logits per position, got ", row.numel());
    const float* p = row.data_ptr<float>();
    return std::vector<float>(p, p + kByteVocab);
}

const char* model_kind(Model& model) {
    if (dynamic_cast<Vit*>(&model) != nullptr) return "a vit";
    return model.task() == Task::kClassification ? "an mlp"
                                                 : "a language model that is not a trit::Gpt";
}

// Puts the model in eval mode and back in training mode at scope exit if it was training.
class EvalScope {
  public:
    explicit EvalScope(torch::nn::Module& m) : model_(m), was_training_(m.is_training()) {
        model_.eval();
    }
    ~EvalScope() {
        if (was_training_) model_.train();
    }
    EvalScope(const EvalScope&) = delete;
    EvalScope& operator=(const EvalScope&) = delete;

  private:
    torch::nn::Module& model_;
    bool was_training_;
};

}  // namespace

void check_generate_options(const GenerateOptions& o) {
    TRIT_CHECK(o.max_tokens >= 0, "generate: max_tokens (--max-tokens) expected >= 0, got ",
               o.max_tokens);
    TRIT_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
               "generate: temperature (--temperature) expected a finite value >= 0 (0 = greedy), "
               "got ",
               o.temperature);
    TRIT_CHECK(o.top_k >= 0 && o.top_k <= kByteVocab, "generate: top_k (--top-k) expected in [0, ",
               kByteVocab, "] (0 = all bytes), got ", o.top_k);
}

uint8_t sample_byte(const std::vector<float>& logits, const GenerateOptions& options,
                    std::mt19937_64& rng) {
    check_generate_options(options);  // top_k bounds the arrays below
    TRIT_CHECK(logits.size() == static_cast<size_t>(kByteVocab), "sample_byte: expected ",
               kByteVocab, " logits, got ", logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        TRIT_CHECK(std::isfinite(logits[i]), "generate: the model gave a non-finite logit (",
                   logits[i], ") for byte ", i);
    std::array<int, kByteVocab> order;
    std::iota(order.begin(), order.end(), 0);
    // Descending logit, the lower byte first among equals: a total order, so no sort-dependent
    // tie breaking.
    auto before = [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    if (options.temperature == 0)
        return static_cast<uint8_t>(*std::min_element(order.begin(), order.end(), before));
    std::sort(order.begin(), order.end(), before);
    const int64_t k = options.top_k == 0 ? kByteVocab : options.top_k;
    const double top = logits[order[0]];
    // (logit - max) / temperature <= 0: no overflow for any temperature; the top byte weighs 1.
    std::array<double, kByteVocab> cumulative{};
    double total = 0;
    for (int64_t i = 0; i < k; ++i) {
        total += std::exp((static_cast<double>(logits[order[i]]) - top) / options.temperature);
        cumulative[i] = total;
    }
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), 53 bits
    const double target = u * total;
    for (int64_t i = 0; i < k; ++i)
        if (target < cumulative[i]) return static_cast<uint8_t>(order[i]);
    // u * total rounded up to total: the last byte with a weight.
    int64_t last = k - 1;
    while (last > 0 && cumulative[last] == cumulative[last - 1])
        --last;
    return static_cast<uint8_t>(order[last]);
}

Decoder::Decoder(Gpt& model, const std::string& prompt) : model_(model), device_(device_of(model)) {
    const std::string start = prompt.empty() ? std::string(data::kFortuneSeparator) : prompt;
    const size_t keep = std::min(start.size(), static_cast<size_t>(model.context()));
    window_.assign(start.end() - static_cast<std::ptrdiff_t>(keep), start.end());
    prompt_tokens_ = static_cast<int64_t>(keep);
    prefill();
}

void Decoder::prefill() {
    torch::NoGradGuard no_grad;
    cache_ = model_.make_cache(/*batch=*/1);
    const torch::Tensor tokens =
        to_tokens(window_.data(), static_cast<int64_t>(window_.size()), device_);
    logits_ = last_logits(model_.forward_cached(tokens, cache_));
}

void Decoder::push(uint8_t byte) {
    if (cache_.length >= model_.context()) {
        window_.push_back(byte);
        const int64_t keep = std::max<int64_t>(1, model_.context() / 2);
        window_.erase(window_.begin(), window_.end() - keep);
        ++refills_;
        prefill();
        return;
    }
    torch::NoGradGuard no_grad;
    window_.push_back(byte);
    logits_ = last_logits(model_.forward_cached(to_tokens(&byte, 1, device_), cache_));
}

double GenerateStats::prefill_tokens_per_s() const {
    return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerateStats::decode_tokens_per_s() const {
    return decode_seconds > 0 ? static_cast<double>(tokens) / decode_seconds : 0.0;
}

GenerateResult generate(Gpt& model, const std::string& prompt, const GenerateOptions& options,
                        const std::function<void(uint8_t)>& on_byte) {
    check_generate_options(options);
    GenerateResult result;
    if (options.max_tokens == 0) return result;
    EvalScope eval(model);
    std::mt19937_64 rng(options.seed);

    Clock::time_point start = Clock::now();
    Decoder decoder(model, prompt);
    result.stats.prompt_tokens = decoder.prompt_tokens();
    result.stats.prefill_seconds = seconds_since(start);

    result.bytes.reserve(static_cast<size_t>(options.max_tokens));
    for (int64_t i = 0; i < options.max_tokens; ++i) {
        start = Clock::now();
        const uint8_t byte = sample_byte(decoder.logits(), options, rng);
        result.stats.decode_seconds += seconds_since(start);
        result.bytes.push_back(static_cast<char>(byte));
        if (on_byte) on_byte(byte);  // before the next step: the byte shows as soon as it exists
        if (i + 1 == options.max_tokens) break;  // the last byte needs no logits after it
        start = Clock::now();
        decoder.push(byte);
        result.stats.decode_seconds += seconds_since(start);
    }
    result.stats.tokens = options.max_tokens;
    result.stats.refills = decoder.refills();
    return result;
}

GenerateResult generate(Model& model, const std::string& prompt, const GenerateOptions& options,
                        const std::function<void(uint8_t)>& on_byte, const std::string& source) {
    Gpt* gpt = dynamic_cast<Gpt*>(&model);
    TRIT_CHECK(gpt != nullptr, "generate needs a gpt model; ", source, " holds ",
               model_kind(model));
    return generate(*gpt, prompt, options, on_byte);
}

}  // namespace trit
