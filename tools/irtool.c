/* irtool: the command-line entry point. Dispatches to one function per command; the command
 * table below is the single list of commands, their summaries and their help texts.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const CliCommand commands[] = {
    {"fmt", "print a model as canonical text",
     "usage: irtool fmt FILE [-i]\n"
     "\n"
     "Parses FILE (.ir, .irb or .onnx; '-' reads stdin) and prints it as canonical text IR to\n"
     "stdout. Canonical means deterministic: parsing the output and printing again gives the\n"
     "same bytes.\n"
     "\n"
     "  -i, --in-place   rewrite FILE (a .ir file) atomically instead of printing\n",
     cmd_fmt},
    {"convert", "convert between .ir, .irb and .onnx",
     "usage: irtool convert IN -o OUT [--no-verify]\n"
     "\n"
     "Reads IN and writes OUT; formats come from the extensions (.ir text, .irb binary,\n"
     ".onnx). The input is verified first unless --no-verify. OUT is written atomically\n"
     "(temporary file, then rename); '-o -' prints text to stdout.\n",
     cmd_convert},
    {"verify", "check a model against the IR's rules",
     "usage: irtool verify FILE [--max-errors N]\n"
     "\n"
     "Checks SSA form, scoping, operand and attribute rules and types from the op table.\n"
     "Prints every error (up to N, default 20) with its location. Exit 0 when valid, 1 when not.\n",
     cmd_verify},
    {"opt", "run a pass pipeline (canonicalize, cse, dce, ...)",
     "usage: irtool opt MODEL [-p PIPELINE] [-o OUT] [options]\n"
     "\n"
     "Runs the passes of PIPELINE over MODEL and writes the result to OUT (default: text to\n"
     "stdout). PIPELINE is `name{opt=value,...},name,...` or a named pipeline (`default`).\n"
     "Without -p, a reproducer's own pipeline (meta \"irtool.pipeline\") or `default` runs.\n"
     "\n"
     "  --list-passes             list passes with their options, and the named pipelines\n"
     "  --verify-each             verify after every pass (the default)\n"
     "  --no-verify-each          do not verify between passes\n"
     "  --print-ir-after=PASS|all print the IR after PASS (or every pass) to stderr\n"
     "  --print-ir-after-change   print the IR after each pass that changed it\n"
     "  --pass-timing             print wall time per pass and in total\n"
     "  --pass-stats              print the counters each pass reports\n"
     "  --quiet                   no progress line (it is drawn only on a terminal)\n"
     "  --reproducer FILE         where to write the reproducer when a pass fails\n"
     "                            (default OUT.repro.ir, or irtool-opt.repro.ir)\n",
     cmd_opt},
    {"info", "summarize a model (nodes, ops, weights, symbols)",
     "usage: irtool info FILE [--json] [--no-verify]\n"
     "\n"
     "Prints node count, op histogram, parameters, weight bytes, symbols and constraints,\n"
     "regions, fused groups, inputs and outputs. --json prints one JSON object with stable keys:\n"
     "nodes, ops, parameters, weight_bytes, fused_groups, regions, symbols, constraints,\n"
     "inputs, outputs.\n",
     cmd_info},
    {"run", "run a model with the reference interpreter",
     "usage: irtool run MODEL --input [NAME=]FILE.npy ... [--output-dir DIR]\n"
     "                  [--dump-intermediates DIR]\n"
     "\n"
     "Runs MODEL (.ir, .irb or .onnx, verified first) on .npy inputs with the reference\n"
     "interpreter and prints one line per output: name, dtype and shape, min, max, mean.\n"
     "Inputs are matched by graph input name (NAME=FILE.npy) or, without NAME, by position\n"
     "among the inputs not named. Symbolic dims are bound from the inputs and checked against\n"
     "the graph's constraints. Execution is single-threaded and deterministic.\n"
     "Sequence and optional inputs are ONNX SequenceProto / OptionalProto .pb files. A sequence\n"
     "output prints a header line and one line per element (NAME[K]) and is written as\n"
     "DIR/<output>_0.npy, DIR/<output>_1.npy, ... (none when empty); an optional output is\n"
     "written as what it holds (nothing when empty).\n"
     "\n"
     "  --input [NAME=]FILE.npy     an input (repeat for each graph input)\n"
     "  --output-dir DIR            write DIR/<output>.npy for each graph output\n"
     "  --dump-intermediates DIR    write every computed value as DIR/<value>.npy\n"
     "  --backend interp|llvm       interp (default), or llvm: compile in memory (static shapes\n"
     "                              after binding symbols from the inputs) and run\n"
     "  --winograd 4|2|off          llvm: Winograd tile for 3x3 Convs (see compile)\n"
     "MODEL may also be an .irx artifact from `irtool compile`: it runs through\n"
     "libirtool-runtime, its inputs checked against the compiled shapes.\n"
     "\n"
     "File names keep [A-Za-z0-9_.-] of the value name, other characters become '_', and\n"
     "collisions get _2, _3, ... in value order; values inside Loop and Scan bodies are\n"
     "rewritten every iteration, so the last one remains. Exit 0 on success, 1 on bad input\n"
     "data or a run error, 2 on usage errors (unknown, missing or extra inputs).\n",
     cmd_run},
    {"conformance", "run ONNX conformance test folders with the reference interpreter, the LLVM or the CUDA backend",
     "usage: irtool conformance DIR... [--junit FILE] [--filter REGEX] [--expect FILE] [--quiet]\n"
     "                          [-j N] [--timeout S] [--backend interp|llvm|cuda [--symbolic]]\n"
     "                          [--pack DIR]\n"
     "\n"
     "Each DIR is an ONNX test folder (model.onnx and test_data_set_*/ with input_K.pb and\n"
     "output_K.pb) or a folder of such folders. Outputs are compared with\n"
     "|got - expected| <= 1e-7 + 1e-3 * |expected| (NaN equals NaN; shapes and dtypes must\n"
     "match). Graphs with random ops (Bernoulli, RandomUniform, ...) are checked for output\n"
     "shape and dtype only, and so are light/-style models (light_NAME.onnx with\n"
     "light_NAME_output_0.pb), run on a seeded uniform [0, 1) input: 'pass NAME (shape only)'.\n"
     "One line per test, sorted by name: 'pass NAME', 'fail NAME: ...' or\n"
     "'unsupported NAME: ...', then 'N passed, N failed, N skipped' (unsupported tests count as\n"
     "skipped).\n"
     "\n"
     "  --junit FILE     write a JUnit XML report\n"
     "  --filter REGEX   run only tests whose name matches (POSIX extended regex)\n"
     "  --expect FILE    names expected to pass, one per line ('#' comments): exit 1 if any\n"
     "                   does not pass, and list newly passing tests\n"
     "  --quiet          print only failures and the summary\n"
     "  -j, --jobs N     run N tests at once (each test runs in its own process; the output\n"
     "                   is the same for every N)\n"
     "  --timeout S      fail a test that runs longer than S seconds (default 600, 0 = none)\n"
     "  --backend B      interp (default) or llvm: compile each data set with the LLVM backend\n"
     "                   (in memory, specialized to its input shapes) and compare the same way;\n"
     "                   a model it cannot compile is 'unsupported' naming the op or dtype;\n"
     "                   light/ models are compared with the interpreter's outputs on the same\n"
     "                   inputs (rtol 1e-4, atol 1e-5), a final Softmax through its logits;\n"
     "                   cuda: compile each node test for cuda:sm_90 and, with a GPU, run and\n"
     "                   compare it; without one each test is 'compiled NAME' (ptxas accepted\n"
     "                   it) or 'unsupported NAME: ...', then 'N compiled, N unsupported', and\n"
     "                   --expect lists the tests that must compile\n"
     "  --symbolic       with --backend llvm or cuda: compile each model once as an artifact with\n"
     "                   every input dim other than 1 a symbol of its own ranged [1, 2d + 8] (the\n"
     "                   code evaluates shapes at run time), then run it at the test's shapes\n"
     "  --pack DIR       with --backend cuda: also write each compiled data set to\n"
     "                   DIR/NAME[/SET]/ as model.irx, input_K.npy and expected_K.npy, for\n"
     "                   irtool-run --expect on a GPU machine (bench/gpu/pack.sh)\n"
     "\n"
     "Exit 0 unless an --expect regression is found (1) or the arguments are wrong (2).\n",
     cmd_conformance},
    /* -- validate (issue 6) -- */
    {"validate", "compare a model with a reference and locate where it diverges",
     "usage: irtool validate REF CAND [--input [NAME=]FILE.npy ... | --random N [--seed S]]\n"
     "       irtool validate MODEL -p PIPELINE [inputs as above]\n"
     "       irtool validate --corpus DIR --baseline FILE.json [--update-baseline] [--jobs N]\n"
     "                       [--shard I/N] [--junit FILE] [--root DIR] [--quiet]\n"
     "\n"
     "Runs both models (.ir, .irb, .onnx) with the reference interpreter on the same inputs and\n"
     "compares each output: max abs/rel error, mean abs error, RMS, cosine similarity, max ULP\n"
     "distance in the output dtype, fraction within tolerance, the worst element (index, values),\n"
     "argmax agreement (rank-2 outputs) and the smallest rtol (given atol) or atol (given rtol)\n"
     "that would pass. With -p, the candidate is MODEL after PIPELINE. CAND may be a compiled\n"
     "artifact (.irx): its code runs through libirtool-runtime against REF in the interpreter\n"
     "(no localization inside compiled code); a REF .irx is the graph it was compiled from.\n"
     "Defaults: f32 rtol 1e-5\n"
     "atol 1e-6; f16/bf16 1e-3; a candidate with FP8 ops is judged by cosine >= 0.99.\n"
     "When an output fails, intermediates are compared in candidate order, matched through\n"
     "provenance (a node's provenance names, else its own name; results by value name, else by\n"
     "position), and the first diverging node or fused group is reported with its location.\n"
     "\n"
     "  --input [NAME=]FILE.npy   an input (by name, else by position); sequence and optional\n"
     "                            inputs as ONNX SequenceProto / OptionalProto .pb files\n"
     "  --random N [--seed S]     N generated input sets (seeds S, S+1, ...; default S = 0);\n"
     "                            symbolic dims take max(lo, min(hi, 4)) within the constraints\n"
     "  --rtol X --atol Y --min-cosine Z   global tolerances\n"
     "  --tol OUT=rtol:X,atol:Y,cosine:Z   tolerances for one output\n"
     "  --json FILE               JSON report (stable keys; \"first_divergence\")\n"
     "  --junit FILE              JUnit XML (one testcase per model and output)\n"
     "  --reduce OUT.ir           write the diverging candidate node alone, its operands as\n"
     "                            constants (candidate run), to OUT.ir, and the reference node(s)\n"
     "                            it maps to, operands from the reference run, to OUT.ref.ir;\n"
     "                            'irtool validate OUT.ref.ir OUT.ir' reproduces the failure\n"
     "\n"
     "Corpus mode runs DIR/manifest.txt: one line per entry, 'NAME MODEL INPUTS PIPELINE'\n"
     "(MODEL relative to --root, default '.', or ${SHARED}/... for $IRTOOL_SHARED_DIR, default\n"
     "ROOT/../shared; INPUTS 'random:SEED' or comma-separated [NAME=]FILE.npy; PIPELINE text or\n"
     "'-'), checks each pipeline output against its input and against the baseline (fail when\n"
     "max_abs_err > 2 x baseline + 1e-7 or cosine < baseline - 1e-6). Missing models are\n"
     "skipped. --jobs N forks N workers (output in entry order); --shard I/N runs entries with\n"
     "index % N == I.\n"
     "\n"
     "Exit 0 pass, 1 accuracy failure or regression, 2 error.\n",
     cmd_validate},
    {"bench", "time in-process inference (interpreter, LLVM backend or compiled artifact)",
     "usage: irtool bench MODEL|ARTIFACT.irx [--input [NAME=]FILE.npy ...] [--backend interp|llvm]\n"
     "                    [--iterations N] [--warmup N] [--threads T] [--profile] [--winograd 4|2|off]\n"
     "\n"
     "Runs MODEL N times (default 20) after warm-up (default 3) in this process and prints\n"
     "median_ms, min_ms, p90_ms and median_cpu_ms (this thread's CPU time: steadier than wall\n"
     "time on a shared machine; llvm: outputs allocated once and reused, as a serving loop\n"
     "would; --threads: threads for OpenBLAS and for the generated Convs split into parts,\n"
     "default all cores), and\n"
     "peak memory (peak_rss_kb; for llvm also the compile time\n"
     "and the planned workspace bytes). Inputs not given are generated deterministically\n"
     "(uniform [0, 1)) when their shape is static.\n"
     "An .irx artifact is loaded once with libirtool-runtime (load_ms) and run with irt_run;\n"
     "the output buffers are allocated per run, as irt_run returns them. --profile (artifacts)\n"
     "then runs it N more times through its traced entry and prints every kernel's mean time,\n"
     "slowest first, with the op and result of the node it computes. --winograd: as compile's.\n",
     cmd_bench},
    /* -- compile, inspect (issue 8, artifacts) -- */
    {"compile", "compile a model ahead of time into an .irx artifact (LLVM: CPU or CUDA)",
     "usage: irtool compile MODEL [-p PIPELINE] [--target cpu[:CPUNAME] | cuda:SM] [--input [NAME=]FILE.npy ...]\n"
     "                      [--tf32] [--no-validate] [--cache-dir DIR | --no-cache] [--winograd 4|2|off]\n"
     "                      [--quiet] -o OUT.irx\n"
     "\n"
     "Runs PIPELINE (if given), binds symbolic dims from the inputs (inputs not given are\n"
     "generated when their shape is static), compiles with the LLVM backend for the target CPU\n"
     "(default: this host's CPU and features; cpu:NAME for another CPU with its default features)\n"
     "into position-independent code linked by the system linker (cc, or $CC), and writes an\n"
     "artifact holding a manifest, the weights, the code and the binary IR. The artifact runs\n"
     "with libirtool-runtime alone (irt_load/irt_run) or with `irtool run OUT.irx`.\n"
     "Before writing, the artifact is run against the reference interpreter on the inputs and\n"
     "refused when an output differs beyond rtol 1e-4, atol 1e-5 (--no-validate skips this).\n"
     "Validated artifacts are cached (--cache-dir DIR; default $XDG_CACHE_HOME/irtool, else\n"
     "$HOME/.cache/irtool; --no-cache disables) under a key over the IR, pipeline, target,\n"
     "versions and input shapes; the summary line says 'cache hit' or 'cache miss'.\n"
     "A second line says what the gate checked: the inputs (files or generated) and their\n"
     "shapes, the tolerance and the worst difference found. Inputs are .npy or .npz files.\n"
     "--input on a model with symbolic dims binds them to the files' shapes (a note says so);\n"
     "without --input the artifact keeps them (each needs an upper bound). On a terminal a\n"
     "progress line shows the stage, kernels built and the time; --quiet turns it off.\n"
     "\n"
     "3x3 stride-1 Convs with constant weights run as Winograd convolutions on AVX-512 and AVX2 CPUs:\n"
     "F(4x4, 3x3) where a layer has 40+ tiles of 4x4 (4x fewer multiplies than direct, errors\n"
     "near 1e-5 of the outputs' scale), else F(2x2, 3x3) (2.25x fewer, as accurate as direct);\n"
     "stride-2 3x3 Convs with 40+ output tiles of 2x2 take a 5x5-input form (1.44x fewer, as\n"
     "accurate as direct).\n"
     "When the gate fails with F(4x4, 3x3) layers the model is recompiled with F(2x2, 3x3) and\n"
     "checked again (a note says so). --winograd 2 uses 2x2 output tiles only (F(2x2, 3x3) and\n"
     "the stride-2 form), off no Winograd (im2col GEMM); the choice reaches the backend as graph\n"
     "metadata irtool.winograd, which a model may also carry itself.\n"
     "\n"
     "--target cuda:sm_80|sm_89|sm_90|sm_90a compiles for an NVIDIA GPU instead: NVPTX kernels\n"
     "generated with LLVM, assembled by the CUDA toolkit's ptxas ($IRTOOL_PTXAS, else the one\n"
     "found at build time, else PATH), GEMMs through cuBLASLt; the artifact keeps the cubin and\n"
     "the PTX. The gate then checks the CPU build of the same graph against the interpreter and,\n"
     "when this machine has a GPU, the CUDA artifact too (FP8 GEMMs, --tf32: cosine >= 0.99); the\n"
     "summary says which. The artifact needs libcuda.so.1 (and cuBLASLt) only where it runs.\n"
     "f32 GEMMs are exact f32 (CUBLAS_COMPUTE_32F) unless --tf32 allows TF32 tensor cores.\n",
     cmd_compile},
    {"inspect", "print an .irx artifact's manifest and whether it can run here",
     "usage: irtool inspect ARTIFACT.irx\n"
     "\n"
     "Prints the manifest (versions, IR hash, pipeline, target triple, CPU and features, inputs\n"
     "and outputs, nodes/kernels, the memory plan: 'ws SLOT OFFSET' and 'const SLOT OFFSET\n"
     "BYTES'; CUDA artifacts: each kernel with the assembler's registers, shared memory and\n"
     "stack, its block size (launch bounds), and the steps) and the preflight result. Exit 0\n"
     "when it can run on this host, else 1.\n",
     cmd_inspect},
    /* -- cache (issue 8, compile cache) -- */
    {"cache", "show or clear the compile cache of `irtool compile`",
     "usage: irtool cache stats|clear [--cache-dir DIR]\n"
     "\n"
     "stats prints the folder, the number of entries and their bytes, and the same per irtool\n"
     "version (entries live in DIR/v<version>/<2 hex>/<key>.irx with a .sum checksum); clear\n"
     "removes them. DIR defaults to $XDG_CACHE_HOME/irtool, else $HOME/.cache/irtool.\n",
     cmd_cache},
    {"ops", "list every op and which backends compile it",
     "usage: irtool ops [--markdown]\n"
     "\n"
     "One line per op of the op table: name, class, and the execution paths that support it\n"
     "(interp: the reference interpreter; cpu: the LLVM backend; cuda: the CUDA backend).\n"
     "--markdown prints the table of docs/ops.md.\n",
     cmd_ops},
    /* -- viz (issue 7) -- */
    {"viz", "draw a model as SVG, DOT, PNG or HTML (Graphviz)",
     "usage: irtool viz MODEL [-p PIPELINE] -o OUT.{svg,dot,png,html} [options]\n"
     "\n"
     "Infers shapes (shape-infer), runs PIPELINE after it if given, and draws the graph with\n"
     "Graphviz: one box per op with its output shape and dtype, weights folded into their\n"
     "consumer's label, fused groups and If/Loop regions as clusters, FP8 ops marked, colours\n"
     "by op class with a legend. Ids are derived from node and value names, so the same input\n"
     "gives the same bytes. .html is one self-contained page: it opens on the inputs at a\n"
     "readable zoom, a click on a node shows its op, attributes, shapes, weights and error in a\n"
     "side panel, search finds node names, op types, group kinds and value names, groups\n"
     "collapse and expand, and a minimap shows where you are.\n"
     "\n"
     "  --highlight REPORT.json  draw a validator report (irtool validate --json): nodes and\n"
     "                           fused groups coloured by 1 - cosine against the reference,\n"
     "                           the first divergence outlined; a passing report says so on\n"
     "                           the picture; a report naming no node of this graph is an error\n"
     "  --no-shape-infer         draw the graph as read (unknown shapes show as '?')\n"
     "  --collapse               draw fused groups and control flow as single boxes (the\n"
     "                           default above 2000 nodes; still larger graphs are drawn as\n"
     "                           segments of consecutive ops)\n"
     "  --no-collapse            never collapse\n"
     "  --collapse-above N       node count above which collapsing is automatic (2000)\n"
     "  --max-nodes N            draw at most N op boxes, then a '... K more nodes' marker\n",
     cmd_viz},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const CliCommand *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

int cli_print_help(const char *cmd) {
    const CliCommand *c = find_command(cmd);
    if (!c) return EXIT_USAGE;
    fputs(c->usage, stdout);
    return EXIT_OK;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "irtool %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'irtool %s --help')\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

static void print_main_help(FILE *f) {
    fprintf(f, "irtool %s: a graph IR toolkit for ahead-of-time compilation of neural networks\n\n",
            IRTOOL_VERSION_STRING);
    fprintf(f, "usage: irtool COMMAND [ARGS...]\n       irtool COMMAND --help\n       irtool --version\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nModels: .ir (text), .irb (binary), .onnx. Exit codes: 0 success, 1 invalid input or\n"
               "check failed, 2 usage error.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (cli_is_help(cmd)) {
        print_main_help(stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("irtool %s (binary IR format %d)\n", IRTOOL_VERSION_STRING, IR_BINARY_FORMAT_VERSION);
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            print_main_help(stdout);
            return EXIT_OK;
        }
        if (cli_print_help(argv[2]) != EXIT_OK) {
            fprintf(stderr, "irtool: unknown command '%s'\n", argv[2]);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    const CliCommand *c = find_command(cmd);
    if (!c) {
        const char *names[sizeof commands / sizeof commands[0]];
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i] = commands[i].name;
        const char *sug = ir_suggest(cmd, names, sizeof commands / sizeof commands[0]);
        if (sug) fprintf(stderr, "irtool: unknown command '%s' (did you mean '%s'?)\n", cmd, sug);
        else fprintf(stderr, "irtool: unknown command '%s' (see 'irtool --help')\n", cmd);
        return EXIT_USAGE;
    }
    for (int i = 2; i < argc; i++)
        if (cli_is_help(argv[i])) return cli_print_help(cmd);
    return c->run(argc - 1, argv + 1);
}
