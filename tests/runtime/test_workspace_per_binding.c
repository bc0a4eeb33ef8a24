/* The memory plan for symbols without an upper bound (backend/lower/memplan.c): values they size
 * and scratch that follows them become blocks placed per binding, the rest keep constant offsets.
 * Checked on a graph of values sized by N, M, N x M, M x M and static ones, with a target hook
 * giving one node a scratch of 16 M^2 bytes: at many bindings, offsets computed by the run-time
 * rule (as irt_shapes computes them) never overlap two values alive together, nor the static
 * part; a scratch that grows with a symbol in no form the target states, or in a form that
 * disagrees with its bytes, is refused naming the node. */
#include "backend/lower/lower.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const char *text =
    "symbol N, M\n"
    "graph @t(%a: f32[N, 8], %b: f32[8, M]) {\n"
    "  const %w: f32[8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
    "  %c = MatMul(%a, %b) : f32[N, M]\n"
    "  %s = Neg(%w) : f32[8]\n"
    "  %d = Neg(%c) : f32[N, M]\n"
    "  %e = Transpose(%d) {perm = [1, 0]} : f32[M, N]\n"
    "  %f = Relu(%a) : f32[N, 8]\n"
    "  %g = MatMul(%e, %f) : f32[M, 8]\n"
    "  %h = Identity(%g) : f32[M, 8]\n"
    "  %i = Add(%h, %h) : f32[M, 8]\n"
    "  %j = Neg(%b) : f32[8, M]\n"
    "  %k = MatMul(%i, %j) : f32[M, M]\n"
    "  %l = Sigmoid(%k) : f32[M, M]\n"
    "  %t = Add(%f, %s) : f32[N, 8]\n"
    "  return %l, %t\n"
    "}\n";

typedef struct Hook {
    int form; /* 0: none, 1: 16 M^2 (right), 2: 8 M^2 (wrong) */
} Hook;

static IrNodeId node_of(const IrGraph *g, IrNodeId n, const char *name) {
    return ir_node_num_results(g, n) && strcmp(ir_value_name(g, ir_node_result(g, n, 0)), name) == 0 ? n : 0;
}

static int64_t scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *user) {
    (void)user;
    if (!node_of(g, n, "k") || !sym) return 0;
    int64_t m;
    cr_assert(ir_expr_eval(g, ir_type_dims(g, ir_value_type(g, ir_node_result(g, n, 0)))[0], sym, &m));
    return 16 * m * m;
}

static int form_kind;
static bool scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f) {
    memset(f, 0, sizeof *f);
    if (!node_of(g, n, "k") || !form_kind) return false;
    const IrExprId *d = ir_type_dims(g, ir_value_type(g, ir_node_result(g, n, 0)));
    f->n_terms = 1;
    f->term[0] = (LowerScratchTerm){.c = form_kind == 1 ? 16 : 8, .n_dims = 2, .dims = {d[0], d[1]}};
    return true;
}

static IrStatus plan_for(IrGraph *g, IrSymPlan *sp, LowerMemPlan *plan, TuDiag *d) {
    cr_assert_eq(ir_sym_plan(g, sp, &d->diag), IR_OK, "%s", tu_diag_text(d));
    int64_t *base = malloc((ir_graph_num_syms(g) + 1) * sizeof *base);
    lower_plan_binding(g, sp, 1, base);
    LowerPlanHooks h = {.scratch = scratch, .concat_in_place = true, .syms = sp, .scratch_form = scratch_form, .diag = &d->diag};
    IrStatus s = lower_plan_memory(g, &h, base, plan);
    free(base);
    return s;
}

/* Bytes of slot `slot` (a value, or node t's scratch) under sym. */
static int64_t slot_bytes(const IrGraph *g, const LowerMemPlan *p, uint32_t slot, const int64_t *sym) {
    uint32_t nv = ir_graph_num_values(g);
    if (slot > nv) {
        for (uint32_t k = 0; k < p->n_dyn; k++)
            if (p->dyn[k].slot == slot) {
                int64_t b;
                cr_assert(lower_scratch_form_eval(g, &p->dyn[k].scratch, sym, &b));
                return b;
            }
        return p->bytes[slot];
    }
    uint32_t r;
    int64_t dims[IR_MAX_RANK], n = 4;
    cr_assert(lower_value_dims_at(g, slot, sym, &r, dims));
    for (uint32_t i = 0; i < r; i++) n *= dims[i];
    return n;
}

Test(workspace_per_binding, blocks_alive_together_never_overlap) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "w.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrSymPlan sp;
    LowerMemPlan p;
    form_kind = 1;
    cr_assert_eq(plan_for(g, &sp, &p, &d), IR_OK, "%s", tu_diag_text(&d));
    uint32_t nv = ir_graph_num_values(g), nn = p.n_slots - nv - 1;
    /* the lifetimes: first and last node index of each slot (graph outputs: to the end) */
    uint32_t *first = calloc(p.n_slots, sizeof *first), *last = calloc(p.n_slots, sizeof *last), t = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n), t++) {
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) first[ir_node_result(g, n, i)] = last[ir_node_result(g, n, i)] = t;
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) last[ir_node_operand(g, n, i)] = t;
        first[nv + 1 + t] = last[nv + 1 + t] = t;
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) last[ir_graph_output(g, i)] = nn;
    /* which values are placed per binding: the N- and M-sized ones and k's scratch, not s */
    IrValueId s = 0, k = 0, h = 0;
    for (IrValueId v = 1; v <= nv; v++) {
        if (!strcmp(ir_value_name(g, v), "s")) s = v;
        if (!strcmp(ir_value_name(g, v), "k")) k = v;
        if (!strcmp(ir_value_name(g, v), "h")) h = v;
    }
    cr_assert(p.offset[s] >= 0, "a static value keeps a constant offset");
    cr_assert_eq(p.offset[k], LOWER_OFF_DYN);
    cr_assert(p.n_dyn >= 9, "%u blocks", p.n_dyn);
    bool scratch_seen = false, alias_seen = false;
    for (uint32_t b = 0; b < p.n_dyn; b++) {
        scratch_seen |= p.dyn[b].slot > nv;
        alias_seen |= p.dyn[b].slot == h && p.dyn[b].alias >= 0; /* Identity in place */
        for (uint32_t q = 0; q < p.dyn[b].n_pred; q++) cr_assert(p.dyn[b].pred[q] < b, "preds come first");
    }
    cr_assert(scratch_seen && alias_seen);
    int64_t *sym = malloc((ir_graph_num_syms(g) + 1) * sizeof *sym), *off = malloc(p.n_dyn * sizeof *off),
            *len = malloc(p.n_dyn * sizeof *len);
    uint64_t x = 12345;
    for (int trial = 0; trial < 300; trial++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int64_t nval = trial < 5 ? trial + 1 : (int64_t)(x >> 33) % 700 + 1, mval = trial < 5 ? 5 - trial : (int64_t)(x >> 13) % 700 + 1;
        for (uint32_t q = 0; q <= ir_graph_num_syms(g); q++) sym[q] = -1;
        sym[sp.sym[0]] = nval, sym[sp.sym[1]] = mval;
        int64_t base = (int64_t)(p.peak + 63) / 64 * 64;
        for (uint32_t b = 0; b < p.n_dyn; b++) { /* the run-time rule (cpu/dyn.c: llvm_build_shapes) */
            len[b] = slot_bytes(g, &p, p.dyn[b].slot, sym);
            if (p.dyn[b].alias >= 0) {
                off[b] = off[p.dyn[b].alias];
                continue;
            }
            int64_t at = base;
            for (uint32_t q = 0; q < p.dyn[b].n_pred; q++)
                if (off[p.dyn[b].pred[q]] + len[p.dyn[b].pred[q]] > at) at = off[p.dyn[b].pred[q]] + len[p.dyn[b].pred[q]];
            off[b] = (at + 63) / 64 * 64;
        }
        for (uint32_t b = 0; b < p.n_dyn; b++) {
            cr_assert(off[b] >= (int64_t)p.peak, "block %u inside the static part", b);
            for (uint32_t c = b + 1; c < p.n_dyn; c++) {
                uint32_t u = p.dyn[b].slot, v = p.dyn[c].slot;
                int32_t ru = p.dyn[b].alias >= 0 ? p.dyn[b].alias : (int32_t)b, rv = p.dyn[c].alias >= 0 ? p.dyn[c].alias : (int32_t)c;
                if (ru == rv || first[u] > last[v] || first[v] > last[u]) continue; /* one place, or never alive together */
                bool apart = off[b] + len[b] <= off[c] || off[c] + len[c] <= off[b];
                cr_assert(apart, "N = %lld, M = %lld: slots %u [%lld, +%lld) and %u [%lld, +%lld) overlap", (long long)nval,
                          (long long)mval, u, (long long)off[b], (long long)len[b], v, (long long)off[c], (long long)len[c]);
            }
        }
    }
    free(sym), free(off), free(len), free(first), free(last);
    lower_plan_free(&p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(workspace_per_binding, scratch_without_a_form_refused) {
    for (form_kind = 0; form_kind <= 2; form_kind += 2) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(text, "w.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        IrSymPlan sp;
        LowerMemPlan p;
        cr_assert_eq(plan_for(g, &sp, &p, &d), IR_EUNSUPPORTED, "form %d planned", form_kind);
        cr_assert(strstr(tu_diag_text(&d), "the scratch of MatMul grows with them"), "%s", tu_diag_text(&d));
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
}
