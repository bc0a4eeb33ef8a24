/* Shared pieces of the irtool CLI: the command table, argument helpers, exit codes.
 * Only tools/ prints to the terminal or chooses exit codes.
 */
#ifndef IRTOOL_CLI_H
#define IRTOOL_CLI_H

#include "ir/ir.h"

#include <stdbool.h>

enum { EXIT_OK = 0, EXIT_INVALID = 1, EXIT_USAGE = 2 };

typedef struct CliCommand {
    const char *name;
    const char *summary;
    const char *usage; /* full help text */
    int (*run)(int argc, char **argv);
} CliCommand;

/* Diagnostics to stderr with source lines and carets, capped. */
void cli_diag_init(IrDiag *d);
/* Prints "irtool CMD: message" and the usage hint to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when argv[i] is -h/--help. */
bool cli_is_help(const char *arg);
/* The value of --winograd for command cmd (argv[*i], or after '=' in opt; *i advanced past a
 * separate value) into *out: "4", "2" or "off" (EXIT_OK), else a usage error (its exit code).
 * cli_apply_winograd records it in g's metadata for the CPU backend (IR_META_WINOGRAD; nothing
 * when value is NULL). */
int cli_winograd_arg(const char *cmd, const char *opt, int argc, char **argv, int *i, const char **out);
void cli_apply_winograd(IrGraph *g, const char *value);
/* Prints the command's help to stdout. */
int cli_print_help(const char *cmd);
/* Maps a library status to an exit code. */
int cli_exit_for(IrStatus s);
/* Index of the graph input named name[0..n), or -1. */
int cli_find_input(const IrGraph *g, const char *name, size_t n);
/* Deterministic uniform [0, 1) data for graph input value v (its type must be static); the
 * tensor is owned by the caller. IR_EUNSUPPORTED when the shape is not static. */
struct IrTensor;
IrStatus cli_gen_input(const IrGraph *g, IrValueId v, struct IrTensor *t);
/* The same with a symbolic leading (batch) dim set to batch when batch > 0. */
IrStatus cli_gen_input_batch(const IrGraph *g, IrValueId v, int64_t batch, struct IrTensor *t);
/* The same with every dim evaluated under sym (symbol values by id). */
IrStatus cli_gen_input_syms(const IrGraph *g, IrValueId v, const int64_t *sym, struct IrTensor *t);
/* Fills t with uniform [0, 1) values from a fixed-seed generator (the same values for the same seed). */
void cli_fill_uniform(struct IrTensor *t, uint64_t seed);
/* got (ref's dtype and element count) against ref: elements with |got - ref| > atol + rtol |ref|
 * (NaN matches NaN), the worst of them by |diff| / limit (-1 when none), the cosine similarity. */
typedef struct CliCompare {
    int64_t n, bad, worst;
    double cosine, max_abs; /* max_abs: the largest |got - ref| (NaN pairs excluded) */
} CliCompare;
void cli_compare(const struct IrTensor *ref, const void *got, double rtol, double atol, CliCompare *out);
/* --input specs: NAME=FILE by name, FILE for the next input not named. A NAME that is no input
 * (and NAME=FILE no existing file) is a usage error listing the inputs and suggesting the
 * closest; files[i] is input i's file or NULL. Returns an exit code. */
int cli_assign_inputs(const char *cmd, const char *const *names, uint32_t n, const char *const *specs, int n_specs,
                      const char **files);
int cli_assign_graph_inputs(const char *cmd, const IrGraph *g, const char *const *specs, int n_specs,
                            const char **files);
/* Reads input `name` from file: .npy, or .npz (the array called name, or its only array). */
IrStatus cli_read_input(const char *file, const char *name, IrDiag *d, struct IrTensor *out);
/* A tensor irt_run took or returned, as an IrTensor viewing its data (not owned); dtype
 * IR_DTYPE_NONE when the artifact's name for it is not one irtool knows. */
struct IrtArtifact;
struct IrtTensor;
void cli_tensor_of_irt(const struct IrtArtifact *a, const struct IrtTensor *t, struct IrTensor *out);
/* A progress line on stderr for long commands (tools/progress.c): drawn only on a terminal and
 * without --quiet; cleared with cli_progress_clear before other output. */
typedef struct CliProgress {
    bool on, drawn;
    const char *cmd;
    double t0, last;
} CliProgress;
void cli_progress_init(CliProgress *p, const char *cmd, bool quiet);
void cli_progress_stage(CliProgress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_progress_count(CliProgress *p, const char *what, uint64_t done, uint64_t total);
void cli_progress_clear(CliProgress *p);
/* cli_diag_init whose sink clears the progress line before printing. */
void cli_diag_init_progress(IrDiag *d, CliProgress *p);
/* EXIT_OK, or EXIT_INVALID with a message when writing `out` would replace a file named on the
 * command line (an input: the same file by device and inode, whatever its name; NAME=FILE
 * arguments count by FILE). argv entries that are `out` itself (the same pointer) are skipped. */
int cli_refuse_clobber(const char *cmd, const char *out, int argc, char **argv);
/* Loads and (optionally) verifies a model; prints diagnostics. */
IrStatus cli_load(const char *path, bool verify, IrGraph **out);
struct IrSymPlan;
/* `compile --target cuda:*` (tools/compile_cuda.c): builds the CUDA artifact of the specialized
 * graph g after its gate against ref (the interpreter's outputs; NULL = --no-validate). */
int cli_cuda_compile(IrGraph *g, const IrGraph *src, const char *target, bool tf32, const char *pipeline, const struct IrSymPlan *syms,
                     const struct IrTensor *ins,
                     uint32_t n_in, const struct IrTensor *ref, void **bytes, size_t *len, char *summary, size_t scap);

#define CLI_COMMAND(fn) int fn(int argc, char **argv)
CLI_COMMAND(cmd_fmt);
CLI_COMMAND(cmd_convert);
CLI_COMMAND(cmd_verify);
CLI_COMMAND(cmd_info);
CLI_COMMAND(cmd_run);
CLI_COMMAND(cmd_conformance);
CLI_COMMAND(cmd_opt);
CLI_COMMAND(cmd_validate); /* validate (issue 6) */
CLI_COMMAND(cmd_bench); /* bench (issue 8, backend) */
CLI_COMMAND(cmd_viz); /* viz (issue 7) */
CLI_COMMAND(cmd_compile); /* compile (issue 8, artifacts) */
CLI_COMMAND(cmd_inspect); /* inspect (issue 8, artifacts) */
CLI_COMMAND(cmd_cache); /* cache (issue 8, compile cache) */
CLI_COMMAND(cmd_ops);

#endif
