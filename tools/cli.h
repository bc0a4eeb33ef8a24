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
    double cosine;
} CliCompare;
void cli_compare(const struct IrTensor *ref, const void *got, double rtol, double atol, CliCompare *out);
/* EXIT_OK, or EXIT_INVALID with a message when writing `out` would replace a file named on the
 * command line (an input: the same file by device and inode, whatever its name; NAME=FILE
 * arguments count by FILE). argv entries that are `out` itself (the same pointer) are skipped. */
int cli_refuse_clobber(const char *cmd, const char *out, int argc, char **argv);
/* Loads and (optionally) verifies a model; prints diagnostics. */
IrStatus cli_load(const char *path, bool verify, IrGraph **out);
/* `compile --target cuda:*` (tools/compile_cuda.c): builds the CUDA artifact of the specialized
 * graph g after its gate against ref (the interpreter's outputs; NULL = --no-validate). */
int cli_cuda_compile(IrGraph *g, const IrGraph *src, const char *target, bool tf32, const char *pipeline,
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

#endif
