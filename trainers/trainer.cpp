// The QAT training loop: see trainer.h.
#include "trainers/trainer.h"

#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <chrono>
#include <deque>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "quantizers/layer_selection.h"
#include "trainers/checkpoint.h"
#include "trainers/lr_schedule.h"
#include "trainers/metrics.h"
#include "trainers/smsq.h"

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

// The model section of a recipe as YAML, to compare architectures.
std::string model_section_yaml(const ModelConfig& m) {
    Recipe r;
    r.model = m;
    const std::string y = recipe_to_yaml(r);
    const size_t a = y.find("model:"), b = y.find("\ndata:");
    return y.substr(a, b - a);
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

void load_init_weights(Model& model, const ModelConfig& config, const std::string& from) {
    LoadedRun src = load_run(from);
    TRIT_CHECK(model_section_yaml(src.recipe.model) == model_section_yaml(config), "init.from '", from,
               "': its model (", src.recipe.model.type, ") differs from this recipe's model section; ",
               "expected the same architecture");
    auto is_quantizer = [](const std::string& name) {
        return name.size() >= 6 && (name.compare(name.size() - 6, 6, ".scale") == 0 ||
                                    name.find(".initialized") != std::string::npos);
    };
    torch::NoGradGuard no_grad;
    auto src_params = src.model->named_parameters(), src_buffers = src.model->named_buffers();
    auto copy = [&](const std::string& name, torch::Tensor& dst) {
        const torch::Tensor* t = src_params.find(name);
        if (!t) t = src_buffers.find(name);
        if (!t) {
            TRIT_CHECK(is_quantizer(name), "init.from '", from, "': has no tensor '", name, "'");
            return;
        }
        TRIT_CHECK(t->sizes() == dst.sizes(), "init.from '", from, "': tensor '", name, "' is ",
                   t->sizes(), ", expected ", dst.sizes());
        dst.copy_(*t);
    };
    for (auto& item : model.named_parameters()) copy(item.key(), item.value());
    for (auto& item : model.named_buffers()) copy(item.key(), item.value());
}

std::vector<quantizers::LayerSensitivity> select_layers(Recipe& recipe, torch::Device device, TrainData& data) {
    auto& q = recipe.quantization;
    if (q.select.fraction <= 0 || !q.select.layers.empty()) return {};
    torch::manual_seed(recipe.seed);
    std::shared_ptr<Model> model = make_model(recipe.model);
    load_init_weights(*model, recipe.model, recipe.init.from);
    model->to(device);
    QuantizationConfig all = q;
    all.select = {};
    const std::vector<std::string> candidates = quantizers::selected_layers(*model, model->output_layer(), all);
    LinearQuantSpec spec = quantizers::linear_quant_spec(q);
    spec.act_levels = recipe.smsq.stages.empty() ? 3 : recipe.smsq.stages.back();
    const int64_t batches = data.batches_per_epoch();
    auto sens = quantizers::layer_sensitivities(
        *model, candidates, spec, [&](int64_t i) { return data.batch(0, i % batches).x; },
        q.select.calibration_batches);
    q.select.layers = quantizers::least_sensitive(sens, q.select.fraction, q.select.metric);
    return sens;
}

void make_optimizer(TrainingSetup& s, const OptimizerConfig& o) {
    std::set<const void*> linear_weights, scales;
    for (auto& [name, layer] : quant_linears(*s.model)) linear_weights.insert(layer->weight.unsafeGetTensorImpl());
    for (auto& [name, q] : quantizers::act_level_quantizers(*s.model)) scales.insert(q->scale.unsafeGetTensorImpl());
    std::vector<torch::Tensor> decay, no_decay, scale_params;
    for (auto& p : s.model->parameters()) {
        if (linear_weights.count(p.unsafeGetTensorImpl())) decay.push_back(p);
        else if (scales.count(p.unsafeGetTensorImpl())) scale_params.push_back(p);
        else no_decay.push_back(p);
    }
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    s.group_lr_ratio.clear();
    groups.emplace_back(decay, options(o.weight_decay));
    s.group_lr_ratio.push_back(1.0);
    if (!no_decay.empty()) {
        groups.emplace_back(no_decay, options(0.0));
        s.group_lr_ratio.push_back(1.0);
    }
    if (!scale_params.empty()) {
        groups.emplace_back(scale_params, options(0.0));
        s.group_lr_ratio.push_back(o.scale_lr > 0 ? o.scale_lr / o.lr : 1.0);
    }
    s.optimizer = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

TrainingSetup make_training_setup(const Recipe& recipe, torch::Device device, Precision precision) {
    check_precision(precision, device);
    TRIT_CHECK(recipe.quantization.select.fraction <= 0 || !recipe.quantization.select.layers.empty(),
               "quantization.select: the layer selection has not been made (trit train makes it)");
    torch::manual_seed(recipe.seed);
    TrainingSetup s;
    s.device = device;
    s.precision = precision;
    s.model = make_model(recipe.model);
    if (!recipe.init.from.empty()) load_init_weights(*s.model, recipe.model, recipe.init.from);
    s.quantized_layers = quantizers::apply_quantization(*s.model, s.model->output_layer(), recipe.quantization,
                                                        first_stage_levels(recipe.smsq));
    s.sparse_layers = apply_sparsity(*s.model, recipe.sparsity);
    s.model->to(device);
    if (!recipe.distillation.teacher.empty()) {
        const auto& d = recipe.distillation;
        LoadedRun t = load_run(d.teacher);
        TRIT_CHECK(model_section_yaml(t.recipe.model) == model_section_yaml(recipe.model),
                   "distillation.teacher '", d.teacher, "': its model (", t.recipe.model.type,
                   ") differs from this recipe's model section; expected the same architecture");
        s.teacher = t.model;
        s.teacher->to(device);
        s.teacher->eval();
        for (auto& p : s.teacher->parameters()) p.set_requires_grad(false);
        s.distillation = d;
    }
    make_optimizer(s, recipe.optimizer);
    return s;
}

torch::Tensor training_loss(TrainingSetup& s, const torch::Tensor& x, const torch::Tensor& y) {
    const Task task = s.model->task();
    if (!s.teacher) return task_loss(task, s.model->forward(x).to(torch::kFloat32), y);
    const auto& d = s.distillation;
    std::vector<torch::Tensor> hs, ht;
    torch::Tensor logits = s.model->forward_hidden(x, hs).to(torch::kFloat32);
    torch::Tensor teacher_logits;
    {
        torch::NoGradGuard no_grad;
        teacher_logits = s.teacher->forward_hidden(x, ht).to(torch::kFloat32);
    }
    torch::Tensor loss = torch::zeros({}, logits.options());
    if (d.ce > 0) loss = loss + d.ce * task_loss(task, logits, y);
    if (d.kl > 0) {
        const int64_t v = logits.size(-1);
        const double t = d.temperature;
        torch::Tensor ls = torch::log_softmax(logits.reshape({-1, v}) / t, -1);
        torch::Tensor lt = torch::log_softmax(teacher_logits.reshape({-1, v}) / t, -1);
        loss = loss + (d.kl * t * t) * (lt.exp() * (lt - ls)).sum(-1).mean();
    }
    if (d.hidden_mse > 0) {
        TRIT_CHECK(!hs.empty() && hs.size() == ht.size(), "distillation.hidden_mse: the model exposes ",
                   hs.size(), " hidden states and the teacher ", ht.size(), "; expected the same number (> 0)");
        torch::Tensor mse = torch::zeros({}, logits.options());
        for (size_t i = 0; i < hs.size(); ++i)
            mse = mse + (hs[i].to(torch::kFloat32) - ht[i].to(torch::kFloat32)).square().mean();
        loss = loss + (d.hidden_mse / static_cast<double>(hs.size())) * mse;
    }
    return loss;
}

torch::Tensor train_step(TrainingSetup& s, const torch::Tensor& x, const torch::Tensor& y,
                         double lr, double grad_clip) {
    auto& groups = s.optimizer->param_groups();
    for (size_t i = 0; i < groups.size(); ++i)
        static_cast<torch::optim::AdamWOptions&>(groups[i].options())
            .lr(lr * (i < s.group_lr_ratio.size() ? s.group_lr_ratio[i] : 1.0));
    s.optimizer->zero_grad();
    torch::Tensor loss;
    {
        AutocastScope autocast(s.precision);
        loss = training_loss(s, x, y);
    }
    loss.backward();
    if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(s.model->parameters(), grad_clip);
    s.optimizer->step();
    return loss.detach();
}

namespace {

// What a run needs to resume its SMSQ stages, beyond the position: saved as the checkpoint's
// trainer state.
struct StageState {
    int64_t stage = 0;
    int64_t stage_start = 0;
    std::vector<int64_t> budgets;  // steps per stage (early stops move steps to the next stage)
    double best_eval = std::numeric_limits<double>::infinity();
    int64_t bad_evals = 0;
    std::deque<double> recent;  // the last kTransitionWindow training losses
    std::vector<StageTransition> transitions;

    std::vector<double> save() const {
        std::vector<double> v = {1.0, static_cast<double>(stage), static_cast<double>(stage_start),
                                 static_cast<double>(budgets.size())};
        for (int64_t b : budgets) v.push_back(static_cast<double>(b));
        v.push_back(best_eval);
        v.push_back(static_cast<double>(bad_evals));
        v.push_back(static_cast<double>(recent.size()));
        v.insert(v.end(), recent.begin(), recent.end());
        v.push_back(static_cast<double>(transitions.size()));
        for (const auto& t : transitions)
            v.insert(v.end(), {static_cast<double>(t.step), static_cast<double>(t.from_levels),
                               static_cast<double>(t.to_levels), t.loss_before, t.loss_after,
                               t.measured ? 1.0 : 0.0});
        return v;
    }

    void load(const std::vector<double>& v, const std::string& ckpt, size_t stages) {
        size_t i = 0;
        auto next = [&]() {
            TRIT_CHECK(i < v.size(), "checkpoint '", ckpt, "': malformed trainer state");
            return v[i++];
        };
        auto count = [&]() { return static_cast<int64_t>(next()); };
        TRIT_CHECK(!v.empty() && next() == 1.0, "checkpoint '", ckpt, "': unknown trainer state version");
        stage = count();
        stage_start = count();
        budgets.resize(static_cast<size_t>(count()));
        for (auto& b : budgets) b = count();
        TRIT_CHECK(budgets.size() == stages && stage >= 0 && stage < static_cast<int64_t>(stages),
                   "checkpoint '", ckpt, "': its SMSQ stages do not match the recipe's");
        best_eval = next();
        bad_evals = count();
        recent.resize(static_cast<size_t>(count()));
        for (auto& r : recent) r = next();
        transitions.resize(static_cast<size_t>(count()));
        for (auto& t : transitions) {
            t.step = count();
            t.from_levels = count();
            t.to_levels = count();
            t.loss_before = next();
            t.loss_after = next();
            t.measured = next() != 0.0;
        }
    }

    int64_t stage_end() const { return stage_start + budgets[static_cast<size_t>(stage)]; }
};

// The 2:4 masks' flip statistics over the whole run (the masks themselves are the layers'
// buffers): saved as the checkpoint's sparsity state, so a resumed run reports the same summary.
struct MaskState {
    int64_t recomputes = 0;
    double flip_sum = 0, last_flip = 0;  // sum and last of the recomputations' flip rates

    std::vector<double> save() const {
        return {1.0, static_cast<double>(recomputes), flip_sum, last_flip};
    }

    void load(const std::vector<double>& v, const std::string& ckpt) {
        if (v.empty()) return;  // none saved
        TRIT_CHECK(v.size() == 4 && v[0] == 1.0, "checkpoint '", ckpt,
                   "': malformed sparsity state");
        recomputes = static_cast<int64_t>(v[1]);
        flip_sum = v[2];
        last_flip = v[3];
    }
};

double mean_of(const std::deque<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

}  // namespace

TrainSummary train(const Recipe& recipe_in, const TrainOptions& opt) {
    Recipe recipe = recipe_in;
    if (!opt.out_dir.empty()) recipe.output.dir = opt.out_dir;
    const std::string run_dir = recipe.output.dir;
    const std::string ckpt = fs::join(run_dir, kCheckpointFile);
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
    RecipeData recipe_data = make_data(recipe, device);
    TrainData* train_data = recipe_data.train.get();
    EvalData* eval_data = recipe_data.eval.get();

    // A layer selection is made once and recorded in the run's recipe (select.layers): a resumed
    // run takes it from the checkpoint's recipe.
    std::vector<quantizers::LayerSensitivity> sensitivities;
    if (recipe.quantization.select.fraction > 0 && recipe.quantization.select.layers.empty()) {
        if (opt.resume) {
            const Recipe saved = parse_recipe(read_checkpoint_recipe(ckpt), ckpt + " (stored recipe)");
            recipe.quantization.select.layers = saved.quantization.select.layers;
        } else {
            sensitivities = select_layers(recipe, device, *train_data);
        }
    }
    const std::string recipe_text = recipe_to_yaml(recipe);
    TrainingSetup setup = make_training_setup(recipe, device, opt.precision);

    const int64_t batches = train_data->batches_per_epoch();
    const int64_t items = train_data->items_per_batch();
    const int64_t total = t.steps > 0 ? t.steps : t.epochs * batches;
    const StagePlan plan = plan_stages(recipe.smsq, has_level_quantizers(recipe.quantization), total);
    const auto n_stages = static_cast<int64_t>(plan.steps.size());
    if (n_stages > 1)
        for (int64_t s : plan.steps)
            TRIT_CHECK(recipe.schedule.warmup_steps < s, "schedule.warmup_steps (", recipe.schedule.warmup_steps,
                       ") must be shorter than every SMSQ stage (", s, " steps): each stage warms up again");

    TrainSummary summary;
    summary.run_dir = run_dir;
    summary.quantized_layers = setup.quantized_layers;
    summary.item_name = train_data->item_name();
    summary.sparse_layers = setup.sparse_layers;
    const bool sparse = !setup.sparse_layers.empty();
    const int64_t mask_frozen = mask_frozen_step(recipe.sparsity, total);
    TrainPosition pos;
    StageState st;
    st.budgets = plan.steps;
    MaskState ms;
    if (opt.resume) {
        std::string saved;
        std::vector<double> state, sparsity_state;
        pos = load_checkpoint(ckpt, *setup.model, setup.optimizer.get(), &saved, device, &state,
                              &sparsity_state);
        TRIT_CHECK(saved == recipe_text, "--resume: the recipe differs from the one '", run_dir,
                   "' was started with (", first_difference(recipe_text, saved), ")");
        TRIT_CHECK(pos.step <= total && pos.batch <= batches, "--resume: checkpoint position (step ",
                   pos.step, ") does not fit this recipe's ", total, " steps");
        if (!state.empty()) st.load(state, ckpt, plan.steps.size());
        ms.load(sparsity_state, ckpt);
        if (!plan.levels.empty()) set_stage_levels(*setup.model, plan.levels[static_cast<size_t>(st.stage)]);
        summary.resumed_from = pos.step;
    }
    fs::write_file_atomic(fs::join(run_dir, "recipe.yaml"), recipe_text);

    // A transition at step s runs after the checkpoint of step s, so a run resumed from that
    // checkpoint runs it again: the stage line the interrupted run wrote for it goes.
    MetricsLog metrics(fs::join(run_dir, "metrics.jsonl"), pos.step, opt.resume, [&](const std::string& line) {
        return json_has(line, "stage") && json_number(line, "step", "metrics.jsonl") == static_cast<double>(pos.step);
    });
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
        if (recipe.quantization.attention != "none") os << "; attention " << recipe.quantization.attention;
        if (sparse) {
            const auto& c = recipe.sparsity;
            os << "; 2:4 sparsity on " << setup.sparse_layers.size() << " layers, mask " << c.mask;
            if (c.mask == "frozen") {
                os << " (from the " << (recipe.init.from.empty() ? "initial" : "init.from")
                   << " weights)";
            } else {
                os << " (recomputed every "
                   << (c.recompute_every == 1 ? std::string("step")
                                              : std::to_string(c.recompute_every) + " steps");
                if (mask_frozen >= 0) os << ", frozen after step " << mask_frozen;
                os << ")";
            }
        }
        if (n_stages > 1) {
            os << "; SMSQ stages";
            for (int64_t i = 0; i < n_stages; ++i) os << (i ? ", " : " ") << plan.levels[i] << " levels x " << plan.steps[i];
            os << " steps (" << recipe.smsq.degradation << ", rescale " << recipe.smsq.rescale << ")";
        }
        if (setup.teacher)
            os << "; distillation from " << recipe.distillation.teacher << " (ce " << recipe.distillation.ce
               << ", kl " << recipe.distillation.kl << " at T " << recipe.distillation.temperature
               << ", hidden_mse " << recipe.distillation.hidden_mse << ")";
        if (!recipe.init.from.empty()) os << "; weights from " << recipe.init.from;
        if (opt.resume) os << "; resuming from step " << pos.step;
        progress.message(os.str());
        if (!sensitivities.empty()) {
            std::ostringstream ls;
            ls << "layer selection (" << recipe.quantization.select.metric << ", "
               << recipe.quantization.select.calibration_batches << " batches): ";
            for (size_t i = 0; i < sensitivities.size(); ++i)
                ls << (i ? ", " : "") << sensitivities[i].name << " "
                   << (recipe.quantization.select.metric == "mse" ? sensitivities[i].mse
                                                                   : sensitivities[i].relative_mse);
            ls << "; quantized: ";
            for (size_t i = 0; i < recipe.quantization.select.layers.size(); ++i)
                ls << (i ? ", " : "") << recipe.quantization.select.layers[i];
            progress.message(ls.str());
        }
    }
    auto stage_line = [&](int64_t step) {
        if (plan.levels.empty()) return;
        metrics.write({{"step", step}, {"stage", st.stage}, {"levels", plan.levels[static_cast<size_t>(st.stage)]},
                       {"stage_steps", st.budgets[static_cast<size_t>(st.stage)]}});
    };
    if (!opt.resume) stage_line(0);

    const auto start = Clock::now();
    double train_seconds = 0, window_loss = 0;
    // Mask entries changed and recomputed since the last log line (the flip rate logged there).
    int64_t window_flips = 0, window_entries = 0;
    int64_t window_steps = 0, last_eval_step = -1, last_ckpt_step = opt.resume ? pos.step : -1;
    auto run_eval = [&](int64_t step, int64_t epoch) {
        summary.test = eval_data->evaluate(*setup.model);
        last_eval_step = step;
        Fields f = {{"step", step}, {"epoch", epoch}, {"eval_loss", summary.test.loss},
                    {"eval_accuracy", summary.test.accuracy}};
        if (summary.test.language_model) f.push_back({"eval_bits_per_byte", summary.test.bits_per_byte()});
        metrics.write(f);
        progress.message("eval @ step " + std::to_string(step) + ": " + describe_eval(summary.test));
        // Early stop of an earlier SMSQ stage: its remaining steps go to the next stage.
        const int64_t patience = recipe.smsq.early_stop_patience;
        if (patience > 0 && st.stage + 1 < n_stages) {
            if (summary.test.loss < st.best_eval - recipe.smsq.early_stop_min_delta) {
                st.best_eval = summary.test.loss;
                st.bad_evals = 0;
            } else if (++st.bad_evals >= patience && step < st.stage_end()) {
                const auto i = static_cast<size_t>(st.stage);
                const int64_t left = st.stage_end() - step;
                st.budgets[i] -= left;
                st.budgets[i + 1] += left;
                progress.message("stage " + std::to_string(st.stage) + " stops early at step " +
                                 std::to_string(step) + " (no better eval loss in " + std::to_string(patience) +
                                 " evaluations); its " + std::to_string(left) + " remaining steps go to the next stage");
            }
        }
    };
    auto checkpoint = [&](int64_t step, int64_t epoch, int64_t next_batch) {
        TrainPosition p{step, epoch, next_batch};
        if (next_batch >= batches) p = {step, epoch + 1, 0};
        save_checkpoint(ckpt, *setup.model, *setup.optimizer, p, recipe_text,
                        plan.levels.empty() ? std::vector<double>{} : st.save(),
                        sparse ? ms.save() : std::vector<double>{});
        last_ckpt_step = step;
    };
    auto transition = [&](int64_t step) {
        const auto from = plan.levels[static_cast<size_t>(st.stage)];
        const auto to = plan.levels[static_cast<size_t>(st.stage + 1)];
        const auto rescaled = transition_quantizers(
            *setup.model, to, recipe.smsq.rescale,
            [&](int64_t i) { return train_data->batch(0, i % batches).x; }, recipe.smsq.calibration_batches);
        ++st.stage;
        st.stage_start = step;
        st.best_eval = std::numeric_limits<double>::infinity();
        st.bad_evals = 0;
        make_optimizer(setup, recipe.optimizer);
        StageTransition tr;
        tr.step = step;
        tr.from_levels = from;
        tr.to_levels = to;
        tr.loss_before = mean_of(st.recent);
        st.transitions.push_back(tr);
        st.recent.clear();
        double lo = std::numeric_limits<double>::infinity(), hi = 0, sum = 0;
        int64_t kept = 0;
        for (const auto& r : rescaled) {
            lo = std::min(lo, r.factor);
            hi = std::max(hi, r.factor);
            sum += r.factor;
            kept += r.kept ? 1 : 0;
        }
        stage_line(step);
        std::ostringstream os;
        os << "stage " << st.stage << " at step " << step << ": " << from << " -> " << to << " levels, "
           << st.budgets[static_cast<size_t>(st.stage)] << " steps; scales (" << recipe.smsq.rescale << ") x"
           << (rescaled.empty() ? 1.0 : sum / static_cast<double>(rescaled.size())) << " on average (" << lo
           << " .. " << hi << ")";
        if (kept) os << ", " << kept << " kept (no activation left non-zero)";
        os << "; fresh optimizer and schedule";
        progress.message(os.str());
    };

    int64_t step = pos.step;
    for (int64_t epoch = pos.epoch; step < total; ++epoch) {
        const int64_t first_batch = epoch == pos.epoch ? pos.batch : 0;
        for (int64_t b = first_batch; b < batches && step < total; ++b) {
            if (st.stage + 1 < n_stages && step >= st.stage_end()) transition(step);
            const auto t0 = Clock::now();
            const Batch batch = train_data->batch(epoch, b);
            const double lr = lr_at(recipe.schedule, recipe.optimizer.lr, step - st.stage_start,
                                    st.budgets[static_cast<size_t>(st.stage)]);
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
            // A dynamic 2:4 mask is recomputed after the optimizer step, from the updated latent
            // weights: the next forward uses it, and the checkpoint of this step holds it.
            if (mask_recompute_due(recipe.sparsity, step)) {
                const auto tm = Clock::now();
                const MaskFlips f = recompute_masks(*setup.model);
                train_seconds += seconds_since(tm);
                ++ms.recomputes;
                ms.last_flip = f.rate();
                ms.flip_sum += f.rate();
                window_flips += f.changed;
                window_entries += f.total;
                if (step == mask_frozen)
                    progress.message("2:4 masks frozen after step " + std::to_string(step) +
                                     " (sparsity.freeze_after " +
                                     std::to_string(recipe.sparsity.freeze_after) + ")");
            }
            st.recent.push_back(loss);
            if (static_cast<int64_t>(st.recent.size()) > kTransitionWindow) st.recent.pop_front();
            if (!st.transitions.empty() && !st.transitions.back().measured &&
                step - st.transitions.back().step == kTransitionWindow) {
                StageTransition& tr = st.transitions.back();
                tr.loss_after = mean_of(st.recent);
                tr.measured = true;
                metrics.write({{"step", step}, {"transition", static_cast<double>(st.transitions.size())},
                               {"transition_step", tr.step}, {"loss_before", tr.loss_before},
                               {"loss_after", tr.loss_after}, {"loss_jump", tr.loss_jump()}});
            }
            window_loss += loss;
            ++window_steps;
            const bool log_line = step % t.log_every == 0 || step == total;
            // With sparsity a log line adds the masks' flip rate over the recomputations since the
            // previous one (when there were any) and the codes' zero fractions before and after the
            // mask; the progress line shows them too.
            Fields mask_fields;
            if (sparse && log_line) {
                summary.code_zeros = code_zeros(*setup.model);
                std::ostringstream note;
                note << std::fixed << std::setprecision(2);
                if (window_entries > 0) {
                    const double rate =
                        static_cast<double>(window_flips) / static_cast<double>(window_entries);
                    mask_fields.push_back({"mask_flip_rate", rate});
                    note << "mask flips " << 100 * rate << "%  ";
                } else {
                    note << "mask unchanged  ";
                }
                mask_fields.push_back({"zero_codes_dense", summary.code_zeros.dense_fraction()});
                mask_fields.push_back({"zero_codes_masked", summary.code_zeros.masked_fraction()});
                note << std::setprecision(1) << "zeros "
                     << 100 * summary.code_zeros.dense_fraction() << "% -> "
                     << 100 * summary.code_zeros.masked_fraction() << "%";
                progress.set_note(note.str());
                window_flips = 0;
                window_entries = 0;
            }
            progress.step(step, loss, lr);
            if (log_line) {
                summary.final_train_loss = window_loss / static_cast<double>(window_steps);
                Fields f = {{"step", step},
                            {"epoch", epoch},
                            {"loss", summary.final_train_loss},
                            {"lr", lr},
                            {summary.item_name + "_per_s",
                             train_seconds > 0
                                 ? static_cast<double>((step - pos.step) * items) / train_seconds
                                 : 0.0},
                            {"elapsed_s", seconds_since(start)}};
                f.insert(f.end(), mask_fields.begin(), mask_fields.end());
                metrics.write(f);
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
    summary.transitions = st.transitions;
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
    if (n_stages > 1) {
        f.push_back({"stages", static_cast<double>(n_stages)});
        double jump_sum = 0;
        int64_t measured = 0;
        for (size_t i = 0; i < st.transitions.size(); ++i) {
            const auto& tr = st.transitions[i];
            if (!tr.measured) continue;
            f.push_back({"transition_" + std::to_string(i + 1) + "_loss_jump", tr.loss_jump()});
            jump_sum += tr.loss_jump();
            ++measured;
        }
        if (measured) f.push_back({"mean_loss_jump", jump_sum / static_cast<double>(measured)});
    }
    if (sparse) {
        summary.mask_recomputes = ms.recomputes;
        summary.mask_flip_rate_last = ms.last_flip;
        summary.mask_flip_rate_mean =
            ms.recomputes > 0 ? ms.flip_sum / static_cast<double>(ms.recomputes) : 0.0;
        summary.mask_frozen_step = mask_frozen;
        summary.code_zeros = code_zeros(*setup.model);
        f.push_back({"mask_recomputes", static_cast<double>(ms.recomputes)});
        if (ms.recomputes > 0)
            f.insert(f.end(), {{"mask_flip_rate_last", summary.mask_flip_rate_last},
                               {"mask_flip_rate_mean", summary.mask_flip_rate_mean}});
        if (mask_frozen >= 0) f.push_back({"mask_frozen_step", static_cast<double>(mask_frozen)});
        f.insert(f.end(), {{"zero_codes_dense", summary.code_zeros.dense_fraction()},
                           {"zero_codes_masked", summary.code_zeros.masked_fraction()}});
    }
    fs::write_file_atomic(fs::join(run_dir, "summary.json"), json_line(f) + "\n");
    return summary;
}

}  // namespace trit::trainers
