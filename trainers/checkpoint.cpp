// Atomic checkpoints: see checkpoint.h.
#include "trainers/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>


#include "core/error.h"
#include "core/fs.h"
#include "core/sparsity.h"
#include "quantizers/layer_selection.h"
#include "trainers/smsq.h"

namespace trit::trainers {
namespace {

torch::serialize::InputArchive open_archive(const std::string& path, torch::Device device) {
    TRIT_CHECK(fs::is_file(path), "checkpoint '", path,
               "': no such file (expected a run directory's ", kCheckpointFile, ")");
    torch::serialize::InputArchive in;
    try {
        in.load_from(path, device);
    } catch (const c10::Error& e) {
        TRIT_FAIL("checkpoint '", path, "': not a readable trit checkpoint (truncated or corrupt?): ",
                  e.what_without_backtrace());
    }
    c10::IValue format, version;
    TRIT_CHECK(in.try_read("format", format) && format.isString() &&
                   format.toStringRef() == "trit-checkpoint",
               "checkpoint '", path, "': not a trit checkpoint (no 'format' entry)");
    TRIT_CHECK(in.try_read("version", version) && version.isInt() &&
                   version.toInt() == kCheckpointVersion,
               "checkpoint '", path, "': unsupported checkpoint version (this trit reads version ",
               kCheckpointVersion, ")");
    return in;
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer, const TrainPosition& pos,
                     const std::string& recipe_yaml, const std::vector<double>& trainer_state,
                     const std::vector<double>& sparsity_state) {
    torch::serialize::OutputArchive out, model_ar, optim_ar;
    model.save(model_ar);
    optimizer.save(optim_ar);
    out.write("format", c10::IValue(std::string("trit-checkpoint")));
    out.write("version", c10::IValue(kCheckpointVersion));
    out.write("recipe", c10::IValue(recipe_yaml));
    out.write("position", torch::tensor({pos.step, pos.epoch, pos.batch}, torch::kInt64));
    out.write("model", model_ar);
    out.write("optimizer", optim_ar);
    if (!trainer_state.empty())
        out.write("trainer_state", torch::tensor(trainer_state, torch::kFloat64));
    if (!sparsity_state.empty())
        out.write("sparsity_state", torch::tensor(sparsity_state, torch::kFloat64));

    const std::string tmp = path + ".tmp";
    try {
        out.save_to(tmp);
    } catch (const c10::Error& e) {
        TRIT_FAIL("cannot write checkpoint '", tmp, "': ", e.what_without_backtrace());
    }
    {
        // The archive writer does not sync: do it before the rename makes the file visible.
        const int fd = ::open(tmp.c_str(), O_RDONLY);
        if (fd >= 0) {
            ::fsync(fd);
            ::close(fd);
        }
    }
    fs::replace_file(tmp, path);
}

TrainPosition load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer* optimizer, std::string* recipe_yaml,
                              torch::Device device, std::vector<double>* trainer_state,
                              std::vector<double>* sparsity_state) {
    torch::serialize::InputArchive in = open_archive(path, device);
    TrainPosition pos;
    try {
        torch::serialize::InputArchive model_ar;
        in.read("model", model_ar);
        model.load(model_ar);
        if (optimizer) {
            torch::serialize::InputArchive optim_ar;
            in.read("optimizer", optim_ar);
            optimizer->load(optim_ar);
        }
        torch::Tensor p;
        in.read("position", p);
        TRIT_CHECK(p.numel() == 3, "checkpoint '", path, "': malformed 'position' entry");
        pos = {p[0].item<int64_t>(), p[1].item<int64_t>(), p[2].item<int64_t>()};
        if (recipe_yaml) {
            c10::IValue r;
            in.read("recipe", r);
            *recipe_yaml = r.toStringRef();
        }
        if (trainer_state) {
            trainer_state->clear();
            torch::Tensor t;
            if (in.try_read("trainer_state", t)) {
                t = t.to(torch::kCPU, torch::kFloat64).contiguous();
                trainer_state->assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
            }
        }
        if (sparsity_state) {
            sparsity_state->clear();
            torch::Tensor t;
            if (in.try_read("sparsity_state", t)) {
                t = t.to(torch::kCPU, torch::kFloat64).contiguous();
                sparsity_state->assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
            }
        }
    } catch (const c10::Error& e) {
        TRIT_FAIL("checkpoint '", path, "' does not match the recipe's model or optimizer: ",
                  e.what_without_backtrace());
    }
    return pos;
}

std::string read_checkpoint_recipe(const std::string& path) {
    torch::serialize::InputArchive in = open_archive(path, torch::kCPU);
    c10::IValue r;
    TRIT_CHECK(in.try_read("recipe", r) && r.isString(), "checkpoint '", path,
               "': has no recipe entry");
    return r.toStringRef();
}

LoadedRun load_run(const std::string& path) {
    LoadedRun r;
    r.checkpoint = fs::is_dir(path) ? fs::join(path, kCheckpointFile) : path;
    TRIT_CHECK(fs::is_file(r.checkpoint), "'", path, "': expected a run directory holding ",
               kCheckpointFile, " or a checkpoint file");
    r.recipe_yaml = read_checkpoint_recipe(r.checkpoint);
    r.recipe = parse_recipe(r.recipe_yaml, r.checkpoint + " (stored recipe)");
    r.model = make_model(r.recipe.model);
    quantizers::apply_quantization(*r.model, r.model->output_layer(), r.recipe.quantization,
                                   r.recipe.smsq.stages.empty() ? 3 : r.recipe.smsq.stages.back());
    apply_sparsity(*r.model, r.recipe.sparsity);  // the mask24 buffers the checkpoint fills
    std::vector<double> state;
    r.step = load_checkpoint(r.checkpoint, *r.model, nullptr, nullptr, torch::kCPU, &state).step;
    // A checkpoint written before the last SMSQ stage: its quantizers on that stage's grid. The
    // trainer's state starts {version 1, stage index, ...} (StageState::save in trainer.cpp).
    if (!r.recipe.smsq.stages.empty() && state.size() >= 2 && state[0] == 1.0) {
        const auto stage = static_cast<int64_t>(state[1]);
        const auto stages = static_cast<int64_t>(r.recipe.smsq.stages.size());
        TRIT_CHECK(stage >= 0 && stage < stages, "checkpoint '", r.checkpoint, "': SMSQ stage ", stage,
                   " is not one of the recipe's ", stages, " stages");
        if (stage + 1 < stages) set_stage_levels(*r.model, r.recipe.smsq.stages[static_cast<size_t>(stage)]);
    }
    r.model->eval();
    return r;
}

}  // namespace trit::trainers
