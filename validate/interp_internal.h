/* Private to the interpreter core (interp.c, kernel_util.c): the execution context shared by
 * the executor and the kernel helpers. Kernels never see inside it; they use interp.h.
 *
 * env[] is indexed by IrValueId for the whole graph: a value is present while env_set[v] is
 * true. Region execution writes its values into env and clears them when the region ends, so
 * values of enclosing scopes stay visible to nested regions.
 */
#ifndef IRTOOL_INTERP_INTERNAL_H
#define IRTOOL_INTERP_INTERNAL_H

#include "validate/interp.h"

struct InterpCtx {
    const IrGraph *g;
    IrDiag *diag;
    const IrInterpOptions *opt;
    uint32_t n_values;
    IrTensor *env;     /* n_values + 1 entries */
    bool *env_set;     /* value currently bound */
    uint32_t *uses;    /* static use counts (region uses charged to the parent node) */
    uint32_t *left;    /* remaining uses of the current binding */
    bool *pinned;      /* never freed early (graph outputs, region outputs) */
    int64_t *sym;      /* symbol values, index by IrSymId; -1 = unbound */
};

/* The dispatch table (kernels.c): interp_kernels[op]. */
extern const InterpKernel interp_kernels[IR_OP_COUNT];

/* Node description used in messages: "node 'name' (op Conv)". */
void interp_node_desc(const IrGraph *g, IrNodeId n, char *buf, size_t cap);
/* An error located at node n: "node 'n1' (op Conv): message", with source line and caret. */
void interp_diag_node(IrDiag *diag, const IrGraph *g, IrNodeId n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Runs region r of node `parent` with the given args (executor in interp.c). */
IrStatus interp_exec_region(InterpCtx *c, IrNodeId parent, IrRegionId r, const IrTensor *args,
                            uint32_t n_args, IrTensor *outs) IR_MUST_CHECK;

#endif
