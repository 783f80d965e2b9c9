// The QAT training loop: see trainer.h.
#include "trainers/trainer.h"

#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/fashion_mnist.h"
#include "core/fs.h"
#include "core/sampler.h"
#include "quantizers/layer_selection.h"
#include "trainers/checkpoint.h"
#include "trainers/lr_schedule.h"
#include "trainers/metrics.h"

namespace trit::trainers {
namespace {

// Fashion-MNIST training-split pixel statistics (pixel / 255), fixed so that a model's expected
// input does not depend on data.train_limit.
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// "line N: 'a' vs 'b'" for the first line where two texts differ.
std::string first_difference(const std::string& a, const std::string& b) {
    std::istringstream sa(a), sb(b);
    std::string la, lb;
    for (int line = 1;; ++line) {
        const bool ga = static_cast<bool>(std::getline(sa, la));
        const bool gb = static_cast<bool>(std::getline(sb, lb));
        if (!ga && !gb) return "no difference";
        if (!ga || !gb || la != lb)
            return "line " + std::to_string(line) + ": checkpoint has '" + (gb ? lb : "") +
                   "', this run has '" + (ga ? la : "") + "'";
    }
}

std::string describe_model(const ModelConfig& m) {
    std::string s = m.type + " " + std::to_string(m.input);
    for (int64_t h : m.hidden) s += "-" + std::to_string(h);
    return s + "-" + std::to_string(m.classes);
}

}  // namespace

torch::Device parse_device(const std::string& name) {
    if (name == "cpu") return torch::Device(torch::kCPU);
    if (name.rfind("cuda", 0) == 0) {
        torch::Device d(torch::kCPU);
        try {
            d = torch::Device(name);
        } catch (const c10::Error&) {
            TRIT_FAIL("--device '", name, "': expected cpu, cuda or cuda:N");
        }
        TRIT_CHECK(torch::cuda::is_available(), "--device ", name,
                   ": this LibTorch has no CUDA support or no GPU is visible");
        TRIT_CHECK(!d.has_index() || d.index() < static_cast<int>(torch::cuda::device_count()),
                   "--device ", name, ": only ", torch::cuda::device_count(), " GPU(s) visible");
        return d;
    }
    TRIT_FAIL("--device '", name, "': expected cpu or cuda");
}

std::pair<torch::Tensor, torch::Tensor> load_split(const DataConfig& data, bool train,
                                                   torch::Device device) {
    TRIT_CHECK(data.dataset == "fashion_mnist", "data.dataset: unknown dataset '", data.dataset,
               "'; known: fashion_mnist");
    data::Dataset ds = data::load_fashion_mnist(
        data.path, train ? data::Split::kTrain : data::Split::kTest,
        train ? data.train_limit : data.test_limit);
    torch::Tensor x = ds.images;
    if (data.normalize) x = (x - kFashionMnistMean) / kFashionMnistStd;
    return {x.to(device), ds.labels.to(device)};
}

TrainingSetup make_training_setup(const Recipe& recipe, torch::Device device) {
    torch::manual_seed(recipe.seed);
    TrainingSetup s;
    s.device = device;
    s.model = make_model(recipe.model);
    s.quantized_layers =
        quantizers::apply_quantization(*s.model, s.model->output_layer(), recipe.quantization);
    s.model->to(device);

    // Decoupled weight decay on weight matrices only; biases are not decayed.
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : s.model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    const auto& o = recipe.optimizer;
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(o.weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
    s.optimizer = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
    return s;
}

torch::Tensor train_step(TrainingSetup& s, const torch::Tensor& x, const torch::Tensor& y,
                         double lr, double grad_clip) {
    for (auto& group : s.optimizer->param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    s.optimizer->zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(s.model->forward(x), y);
    loss.backward();
    if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(s.model->parameters(), grad_clip);
    s.optimizer->step();
    return loss.detach();
}

EvalResult evaluate(Model& model, const torch::Tensor& x, const torch::Tensor& y,
                    int64_t batch_size) {
    torch::NoGradGuard no_grad;
    const bool was_training = model.is_training();
    model.eval();
    double loss_sum = 0;
    int64_t correct = 0;
    const int64_t n = x.size(0);
    for (int64_t b = 0; b < n; b += batch_size) {
        const int64_t e = std::min(n, b + batch_size);
        torch::Tensor logits = model.forward(x.slice(0, b, e));
        torch::Tensor yb = y.slice(0, b, e);
        loss_sum += torch::nn::functional::cross_entropy(
                        logits, yb,
                        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                        .item<double>();
        correct += logits.argmax(1).eq(yb).sum().item<int64_t>();
    }
    model.train(was_training);
    EvalResult r;
    r.examples = n;
    r.loss = n ? loss_sum / static_cast<double>(n) : 0.0;
    r.accuracy = n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
    return r;
}

TrainSummary train(const Recipe& recipe_in, const TrainOptions& opt) {
    Recipe recipe = recipe_in;
    if (!opt.out_dir.empty()) recipe.output.dir = opt.out_dir;
    const std::string run_dir = recipe.output.dir;
    const std::string ckpt = fs::join(run_dir, kCheckpointFile);
    const std::string recipe_text = recipe_to_yaml(recipe);
    const auto& t = recipe.training;

    fs::make_dirs(run_dir);
    TRIT_CHECK(!(opt.resume && opt.overwrite), "--resume and --overwrite exclude each other");
    if (opt.overwrite) {
        for (const char* f : {kCheckpointFile, "metrics.jsonl", "summary.json", "recipe.yaml"})
            fs::remove_file(fs::join(run_dir, f));
    }
    if (opt.resume) {
        TRIT_CHECK(fs::exists(ckpt), "--resume: '", run_dir, "' holds no ", kCheckpointFile,
                   " to resume from");
    } else {
        TRIT_CHECK(!fs::exists(ckpt), "output directory '", run_dir,
                   "' already holds a run (", kCheckpointFile,
                   "); pass --resume to continue it, --overwrite to start it afresh, or choose another --out");
    }

    const torch::Device device = parse_device(opt.device);
    if (t.threads > 0) torch::set_num_threads(static_cast<int>(t.threads));
    auto [x_train, y_train] = load_split(recipe.data, /*train=*/true, device);
    auto [x_test, y_test] = load_split(recipe.data, /*train=*/false, device);
    TrainingSetup setup = make_training_setup(recipe, device);

    const int64_t n = x_train.size(0);
    const int64_t batches = (n + t.batch_size - 1) / t.batch_size;
    const int64_t total = t.steps > 0 ? t.steps : t.epochs * batches;

    TrainSummary summary;
    summary.run_dir = run_dir;
    summary.quantized_layers = setup.quantized_layers;
    TrainPosition pos;
    if (opt.resume) {
        std::string saved;
        pos = load_checkpoint(ckpt, *setup.model, setup.optimizer.get(), &saved, device);
        TRIT_CHECK(saved == recipe_text, "--resume: the recipe differs from the one '", run_dir,
                   "' was started with (", first_difference(recipe_text, saved), ")");
        TRIT_CHECK(pos.step <= total && pos.batch <= batches, "--resume: checkpoint position (step ",
                   pos.step, ") does not fit this recipe's ", total, " steps");
        summary.resumed_from = pos.step;
    }
    fs::write_file_atomic(fs::join(run_dir, "recipe.yaml"), recipe_text);

    MetricsLog metrics(fs::join(run_dir, "metrics.jsonl"), pos.step, opt.resume);
    Progress progress(total, pos.step, t.batch_size, t.log_every, opt.progress);
    {
        std::ostringstream os;
        os << "trit train " << recipe.name << ": " << describe_model(recipe.model) << ", "
           << n << " training examples, " << total << " steps of " << t.batch_size << " on "
           << device.str() << "; quantized layers: ";
        if (setup.quantized_layers.empty()) os << "none (float)";
        for (size_t i = 0; i < setup.quantized_layers.size(); ++i)
            os << (i ? ", " : "") << setup.quantized_layers[i];
        if (!setup.quantized_layers.empty())
            os << " (weights " << recipe.quantization.weight.method << "/"
               << recipe.quantization.weight.granularity << ", activations "
               << recipe.quantization.activation.method << ")";
        if (opt.resume) os << "; resuming from step " << pos.step;
        progress.message(os.str());
    }

    const auto start = Clock::now();
    double train_seconds = 0, window_loss = 0;
    int64_t window_steps = 0, last_eval_step = -1, last_ckpt_step = opt.resume ? pos.step : -1;
    auto run_eval = [&](int64_t step, int64_t epoch) {
        summary.test = evaluate(*setup.model, x_test, y_test, t.eval_batch_size);
        last_eval_step = step;
        metrics.write({{"step", step}, {"epoch", epoch}, {"eval_loss", summary.test.loss},
                       {"eval_accuracy", summary.test.accuracy}});
        std::ostringstream os;
        os << "eval @ step " << step << ": test accuracy " << std::fixed << std::setprecision(2)
           << 100.0 * summary.test.accuracy << "%, loss " << std::setprecision(4)
           << summary.test.loss;
        progress.message(os.str());
    };
    auto checkpoint = [&](int64_t step, int64_t epoch, int64_t next_batch) {
        TrainPosition p{step, epoch, next_batch};
        if (next_batch >= batches) p = {step, epoch + 1, 0};
        save_checkpoint(ckpt, *setup.model, *setup.optimizer, p, recipe_text);
        last_ckpt_step = step;
    };

    int64_t step = pos.step;
    for (int64_t epoch = pos.epoch; step < total; ++epoch) {
        const std::vector<int64_t> order = data::epoch_permutation(n, recipe.seed, epoch);
        const int64_t first_batch = epoch == pos.epoch ? pos.batch : 0;
        for (int64_t b = first_batch; b < batches && step < total; ++b) {
            const auto t0 = Clock::now();
            const int64_t begin = b * t.batch_size, end = std::min(n, begin + t.batch_size);
            torch::Tensor xb = data::gather_rows(x_train, order, begin, end);
            torch::Tensor yb = data::gather_rows(y_train, order, begin, end);
            const double lr = lr_at(recipe.schedule, recipe.optimizer.lr, step, total);
            const double loss = train_step(setup, xb, yb, lr, recipe.optimizer.grad_clip).item<double>();
            train_seconds += seconds_since(t0);
            ++step;
            if (!std::isfinite(loss)) {
                progress.finish();
                TRIT_FAIL("training diverged: the loss is ", loss, " at step ", step, " (epoch ",
                          epoch, "). The run stopped; ",
                          last_ckpt_step >= 0
                              ? "'" + ckpt + "' keeps the last good state (step " +
                                    std::to_string(last_ckpt_step) + ")"
                              : std::string("no checkpoint had been written yet"),
                          ". Try a lower optimizer.lr or optimizer.grad_clip > 0.");
            }
            window_loss += loss;
            ++window_steps;
            progress.step(step, loss, lr);
            if (step % t.log_every == 0 || step == total) {
                summary.final_train_loss = window_loss / static_cast<double>(window_steps);
                metrics.write({{"step", step}, {"epoch", epoch}, {"loss", summary.final_train_loss},
                               {"lr", lr},
                               {"samples_per_s", train_seconds > 0 ? static_cast<double>(
                                                    (step - pos.step) * t.batch_size) / train_seconds : 0.0},
                               {"elapsed_s", seconds_since(start)}});
                window_loss = 0;
                window_steps = 0;
            }
            if (t.eval_every > 0 && step % t.eval_every == 0) run_eval(step, epoch);
            if (step % t.checkpoint_every == 0 || step == total) checkpoint(step, epoch, b + 1);
            if (opt.after_step) opt.after_step(step);
        }
        if (t.eval_every == 0 && last_eval_step != step) run_eval(step, epoch);
    }
    if (last_eval_step != step) run_eval(step, step / std::max<int64_t>(1, batches));
    if (last_ckpt_step != step) checkpoint(step, total / std::max<int64_t>(1, batches), batches);
    progress.finish();

    summary.steps = step;
    summary.seconds = seconds_since(start);
    summary.samples_per_second =
        train_seconds > 0 ? static_cast<double>((step - pos.step) * t.batch_size) / train_seconds : 0.0;
    fs::write_file_atomic(fs::join(run_dir, "summary.json"),
                    json_line({{"steps", summary.steps},
                               {"test_accuracy", summary.test.accuracy},
                               {"test_loss", summary.test.loss},
                               {"final_train_loss", summary.final_train_loss},
                               {"seconds", summary.seconds},
                               {"train_samples_per_s", summary.samples_per_second}}) + "\n");
    return summary;
}

}  // namespace trit::trainers
