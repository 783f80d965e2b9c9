// The QAT training loop: see trainer.h.
#include "trainers/trainer.h"

#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "quantizers/layer_selection.h"
#include "trainers/checkpoint.h"
#include "trainers/lr_schedule.h"
#include "trainers/metrics.h"

namespace trit::trainers {
namespace {

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

std::string describe_model(const ModelConfig& m, Model& model) {
    std::string s = m.type + " ";
    if (m.type == "mlp") {
        s += std::to_string(m.input);
        for (int64_t h : m.hidden) s += "-" + std::to_string(h);
        s += "-" + std::to_string(m.classes);
    } else {
        s += "dim " + std::to_string(m.dim) + ", depth " + std::to_string(m.depth) + ", heads " +
             std::to_string(m.heads) + ", " + m.activation + (m.subln ? ", subln" : "") +
             (m.type == "vit" ? ", patch " + std::to_string(m.patch)
                              : ", context " + std::to_string(m.context));
    }
    int64_t params = 0;
    for (const auto& p : model.parameters()) params += p.numel();
    return s + " (" + std::to_string(params) + " parameters)";
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
                   "--device ", name, ": only ", static_cast<int>(torch::cuda::device_count()), " GPU(s) visible");
        return d;
    }
    TRIT_FAIL("--device '", name, "': expected cpu or cuda");
}

TrainingSetup make_training_setup(const Recipe& recipe, torch::Device device, Precision precision) {
    check_precision(precision, device);
    torch::manual_seed(recipe.seed);
    TrainingSetup s;
    s.device = device;
    s.precision = precision;
    s.model = make_model(recipe.model);
    s.quantized_layers =
        quantizers::apply_quantization(*s.model, s.model->output_layer(), recipe.quantization);
    s.model->to(device);

    // Decoupled weight decay on the linear layers' weights only.
    std::set<const void*> linear_weights;
    for (auto& [name, layer] : quant_linears(*s.model)) linear_weights.insert(layer->weight.unsafeGetTensorImpl());
    std::vector<torch::Tensor> decay, no_decay;
    for (auto& p : s.model->parameters())
        (linear_weights.count(p.unsafeGetTensorImpl()) ? decay : no_decay).push_back(p);
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
    torch::Tensor loss;
    {
        AutocastScope autocast(s.precision);
        loss = task_loss(s.model->task(), s.model->forward(x).to(torch::kFloat32), y);
    }
    loss.backward();
    if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(s.model->parameters(), grad_clip);
    s.optimizer->step();
    return loss.detach();
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
    TrainingSetup setup = make_training_setup(recipe, device, opt.precision);
    RecipeData recipe_data = make_data(recipe, device);
    TrainData* train_data = recipe_data.train.get();
    EvalData* eval_data = recipe_data.eval.get();

    const int64_t batches = train_data->batches_per_epoch();
    const int64_t items = train_data->items_per_batch();
    const int64_t total = t.steps > 0 ? t.steps : t.epochs * batches;

    TrainSummary summary;
    summary.run_dir = run_dir;
    summary.quantized_layers = setup.quantized_layers;
    summary.item_name = train_data->item_name();
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
    Progress progress(total, pos.step, items, train_data->item_name(), t.log_every, opt.progress);
    {
        std::ostringstream os;
        os << "trit train " << recipe.name << ": " << describe_model(recipe.model, *setup.model) << "; "
           << train_data->describe() << "; " << total << " steps of " << t.batch_size << " on "
           << device.str() << (opt.precision == Precision::kBf16 ? " (bf16 autocast)" : "")
           << "; evaluation on " << eval_data->describe() << "; quantized layers: ";
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
        summary.test = eval_data->evaluate(*setup.model);
        last_eval_step = step;
        Fields f = {{"step", step}, {"epoch", epoch}, {"eval_loss", summary.test.loss},
                    {"eval_accuracy", summary.test.accuracy}};
        if (summary.test.language_model) f.push_back({"eval_bits_per_byte", summary.test.bits_per_byte()});
        metrics.write(f);
        progress.message("eval @ step " + std::to_string(step) + ": " + describe_eval(summary.test));
    };
    auto checkpoint = [&](int64_t step, int64_t epoch, int64_t next_batch) {
        TrainPosition p{step, epoch, next_batch};
        if (next_batch >= batches) p = {step, epoch + 1, 0};
        save_checkpoint(ckpt, *setup.model, *setup.optimizer, p, recipe_text);
        last_ckpt_step = step;
    };

    int64_t step = pos.step;
    for (int64_t epoch = pos.epoch; step < total; ++epoch) {
        const int64_t first_batch = epoch == pos.epoch ? pos.batch : 0;
        for (int64_t b = first_batch; b < batches && step < total; ++b) {
            const auto t0 = Clock::now();
            const Batch batch = train_data->batch(epoch, b);
            const double lr = lr_at(recipe.schedule, recipe.optimizer.lr, step, total);
            const double loss = train_step(setup, batch.x, batch.y, lr, recipe.optimizer.grad_clip).item<double>();
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
                               {summary.item_name + "_per_s", train_seconds > 0 ? static_cast<double>(
                                                    (step - pos.step) * items) / train_seconds : 0.0},
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
        train_seconds > 0 ? static_cast<double>((step - pos.step) * items) / train_seconds : 0.0;
    // Classifiers report the test split, language models the validation text.
    Fields f = {{"steps", summary.steps}};
    if (summary.test.language_model) {
        f.insert(f.end(), {{"valid_bits_per_byte", summary.test.bits_per_byte()},
                           {"valid_loss", summary.test.loss},
                           {"valid_perplexity", summary.test.perplexity()},
                           {"valid_accuracy", summary.test.accuracy}});
    } else {
        f.insert(f.end(), {{"test_accuracy", summary.test.accuracy}, {"test_loss", summary.test.loss}});
    }
    f.insert(f.end(), {{"final_train_loss", summary.final_train_loss},
                       {"seconds", summary.seconds},
                       {"train_" + summary.item_name + "_per_s", summary.samples_per_second}});
    fs::write_file_atomic(fs::join(run_dir, "summary.json"), json_line(f) + "\n");
    return summary;
}

}  // namespace trit::trainers
