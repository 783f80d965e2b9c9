// `trit export RUN_DIR|CHECKPOINT --format F --out model.h5`: packs a trained model's selected
// layers into a packed format and writes the HDF5 model file.
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "quantizers/layer_selection.h"
#include "trainers/checkpoint.h"

namespace trit::cli {

Command add_export(CLI::App& app) {
    struct Args {
        std::string source, format, out, float_dtype = "float32", scale_dtype;
        int64_t group = 0;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand("export", "Pack a trained model into an HDF5 model file");
    sub->add_option("source", a->source, "Run directory or checkpoint file")->required();
    sub->add_option("--format", a->format, std::string("Packed format: ") + exporters::known_formats())
        ->required();
    sub->add_option("--out", a->out, "Output model file (.h5)")->required();
    sub->add_option("--float-dtype", a->float_dtype, "Storage of the float layers: float32, float16, bfloat16")
        ->capture_default_str();
    sub->add_option("--scale-dtype", a->scale_dtype,
                    "Scale storage: float32 or float16 (default: float16 for bt<d>, float32 else)");
    sub->add_option("--group", a->group, "bt<d>: input weights per scale (default 64)");
    sub->footer("Layers: those the run's recipe selects (quantization.targets / ignore); the rest stay\n"
                "float. A format the training did not produce is reached by round-to-nearest, and\n"
                "the export says so per layer.\n"
                "Example:\n  trit export runs/fashion_mnist_ternary --format tern2 --out fmnist-tern2.h5");
    return {sub, [a]() {
        trainers::LoadedRun run = trainers::load_run(a->source);
        exporters::ExportOptions o;
        o.format = exporters::parse_format(a->format);
        o.float_dtype = exporters::parse_float_dtype(a->float_dtype);
        o.scale_dtype = a->scale_dtype;
        o.group_size = a->group;
        TRIT_CHECK(a->group == 0 || (a->group >= 1 && o.format.kind == exporters::WeightFormat::kBt),
                   "--group: only bt<d> formats take a group size (>= 1)");
        o.layers = quantizers::selected_layers(*run.model, run.model->output_layer(),
                                               run.recipe.quantization);
        TRIT_CHECK(!o.layers.empty(), "export: the recipe selects no layer to pack");
        exporters::ExportResult r = exporters::pack_model(run.recipe, run.recipe_yaml, *run.model, o);
        exporters::write_model(a->out, r.model);
        std::cout << "export: " << a->out << " (" << o.format.name() << ") from " << run.checkpoint
                  << " (step " << run.step << ")\n";
        for (const auto& l : r.model.layers)
            std::cout << "  " << l.name << ": "
                      << (l.format.packed() ? o.format.name() + ", " + exporters::describe_spec(l.spec)
                                            : std::string("float (") + exporters::float_dtype_name(l.weight_dtype) + ")")
                      << "\n";
        for (const auto& n : r.notes) std::cout << "  note: quantized on export: " << n << "\n";
        return 0;
    }};
}

}  // namespace trit::cli
