/* The workspace memory plan (greedy first fit by value lifetime over the top-level node order,
 * copies and Concats in place where the target allows it) and the value facts it needs: sizes,
 * dims under a binding of the symbols, constant data. Values sized by a symbol without an upper
 * bound get no constant offset: they are blocks placed by the run's binding above the static
 * part (LowerDynBlock). Target-independent: a target says how much scratch each node needs
 * through LowerPlanHooks. */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>

#define WS_ALIGN 64

/* Dims of v with the symbols at sym (NULL: constant dims only). */
bool lower_value_dims_at(const IrGraph *g, IrValueId v, const int64_t *sym, uint32_t *rank, int64_t *dims) {
    if (!sym) return lower_value_shape(g, v, rank, dims);
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &dims[k]) || dims[k] < 0) return false;
    *rank = r;
    return true;
}

size_t lower_value_nbytes(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK], n = 1;
    if (!lower_value_shape(g, v, &r, d)) return 0;
    for (uint32_t i = 0; i < r; i++) n *= d[i];
    return (size_t)n * ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v)));
}

const void *lower_value_const_data(const IrGraph *g, IrValueId v) {
    if (ir_value_kind(g, v) == IR_VALUE_CONST) return ir_const_data(g, ir_value_const(g, v));
    if (ir_value_kind(g, v) != IR_VALUE_RESULT) return NULL;
    IrNodeId n = ir_value_def_node(g, v);
    IrAttrValue av;
    if (ir_node_op(g, n) == IR_OP_CONSTANT && ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR)
        return ir_const_data(g, av.tensor);
    return NULL;
}

/* ---- memory plan --------------------------------------------------------------------------- */

typedef struct Block {
    int64_t off, size;
    uint32_t last;
} Block;

/* A ConstantOfShape result made once per program; with a run-time shape it is computed per run
 * in the workspace instead (cpu/dyn.c). */
bool lower_value_filled_const(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    return ir_value_kind(g, v) == IR_VALUE_RESULT && ir_node_op(g, ir_value_def_node(g, v)) == IR_OP_CONSTANT_OF_SHAPE &&
           lower_value_shape(g, v, &r, d);
}

bool lower_in_workspace(const IrGraph *g, IrValueId v) {
    return v && ir_value_kind(g, v) == IR_VALUE_RESULT && !lower_value_const_data(g, v) && !lower_value_filled_const(g, v);
}

static bool is_graph_output(const IrGraph *g, IrValueId v) {
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++)
        if (ir_graph_output(g, i) == v) return true;
    return false;
}

/* A Concat whose inputs can be computed in place: every input a contiguous block of the output
 * (the dims before the axis are all 1), produced in the workspace by a node other than a Concat,
 * used by this Concat only, and neither it nor its output a graph output. The memory plan then
 * places each input inside the output and the Concat copies nothing. uses: ir_graph_count_uses. */
bool lower_concat_in_place(const IrGraph *g, IrNodeId n, const uint32_t *uses) {
    if (ir_node_op(g, n) != IR_OP_CONCAT || ir_node_region(g, n) != IR_ROOT_REGION) return false;
    IrValueId y = ir_node_result(g, n, 0);
    uint32_t ry;
    int64_t dy[IR_MAX_RANK];
    if (!lower_in_workspace(g, y) || !lower_value_shape(g, y, &ry, dy) || ry == 0) return false;
    bool found;
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), ry);
    if (axis < 0 || axis >= (int64_t)ry || ir_shape_numel((uint32_t)axis, dy) != 1 || is_graph_output(g, y)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || !lower_in_workspace(g, v) || uses[v] != 1 || !lower_value_shape(g, v, &ry, dy)) return false;
        if (ir_type_dtype(g, ir_value_type(g, v)) != ir_type_dtype(g, ir_value_type(g, y))) return false;
        IrNodeId p = ir_value_def_node(g, v);
        if (ir_node_region(g, p) != IR_ROOT_REGION || ir_node_op(g, p) == IR_OP_CONCAT || is_graph_output(g, v)) return false;
    }
    return true;
}

/* A copy node (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout: its data result) whose
 * result may take its input's place: the input is a workspace value that dies at this node,
 * neither is a graph output (those may be redirected into the caller's tensors). The kernel
 * then copies nothing (it compares the two pointers). */
static bool copy_in_place(const IrGraph *g, IrNodeId n, const uint32_t *last, uint32_t t) {
    if (!(lower_op_flags(ir_node_op(g, n)) & LOWER_COPY)) return false;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    return x && y && lower_in_workspace(g, x) && lower_in_workspace(g, y) && last[x] == t && !is_graph_output(g, x) &&
           !is_graph_output(g, y) && ir_type_dtype(g, ir_value_type(g, x)) == ir_type_dtype(g, ir_value_type(g, y));
}

IrValueId lower_size_source(const IrGraph *g, IrValueId v) {
    IrTypeId t = ir_value_type(g, v);
    IrNodeId p = ir_value_kind(g, v) == IR_VALUE_RESULT ? ir_value_def_node(g, v) : 0;
    IrValueId x = p && (lower_op_flags(ir_node_op(g, p)) & LOWER_COPY) && ir_node_result(g, p, 0) == v && ir_node_num_operands(g, p)
                      ? ir_node_operand(g, p, 0)
                      : 0;
    IrTypeId tx = x ? ir_value_type(g, x) : 0;
    if (!t || !tx || ir_type_is_container(g, tx) || ir_type_rank(g, tx) == IR_RANK_UNKNOWN || ir_type_dtype(g, tx) != ir_type_dtype(g, t))
        return v;
    return lower_size_source(g, x);
}

/* Bytes of v, its dims evaluated under sym (symbol values by id) when they are symbolic. */
static size_t value_bytes_at(const IrGraph *g, IrValueId v, const int64_t *sym) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!sym || !t || r == IR_RANK_UNKNOWN) return lower_value_nbytes(g, v);
    IrValueId x = lower_size_source(g, v);
    if (x != v) return value_bytes_at(g, x, sym);
    int64_t n = 1, d;
    for (uint32_t k = 0; k < r; k++) {
        if (!ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &d) || d < 0) return 0;
        n *= d;
    }
    return (size_t)n * ir_dtype_size(ir_type_dtype(g, t));
}

/* The 128-byte phase for the result of root node n (bytes long) when n is a contraction group
 * whose epilogue reads a placed operand of that size (a residual): 64 bytes off that operand's
 * phase, else -1. A GEMM epilogue reading the residual and storing the output at the same
 * (row, column) ran a 56x56 layer (64 -> 256 channels, rows of 12544 bytes, a multiple of 128)
 * 10-20% slower with the two at the same phase (a C model: 0.69 against 0.625 ms, whatever the
 * phase of its input; rows of 12480 bytes, alternating phase, ran fast either way). In
 * ResNet-50 the three such layers at 56x56 0.83-0.95 -> 0.69-0.79 ms. */
static int64_t residual_phase(const IrGraph *g, IrNodeId n, const int64_t *offset, int64_t bytes) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) < 1) return -1;
    IrOp a = ir_node_op(g, ir_region_first(g, ir_node_region_at(g, n, 0)));
    if (a != IR_OP_CONV && a != IR_OP_GEMM && a != IR_OP_MAT_MUL) return -1;
    for (uint32_t i = 1; i < ir_node_num_operands(g, n); i++) {
        IrValueId u = ir_node_operand(g, n, i);
        if (u && lower_in_workspace(g, u) && offset[u] >= 0 && (int64_t)lower_value_nbytes(g, u) == bytes) return (offset[u] + 64) % 128;
    }
    return -1;
}

bool lower_expr_mentions(const IrGraph *g, IrExprId e, const uint8_t *flags) {
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_SYM: return flags[ir_expr_sym_id(g, e)] != 0;
    case IR_EXPR_ADD: case IR_EXPR_SUB: case IR_EXPR_MUL: case IR_EXPR_DIV: case IR_EXPR_MOD:
        return lower_expr_mentions(g, ir_expr_lhs(g, e), flags) || lower_expr_mentions(g, ir_expr_rhs(g, e), flags);
    default: return false;
    }
}

bool lower_sym_unbounded(const IrGraph *g, const IrSymPlan *sp, uint8_t *flags) {
    memset(flags, 0, ir_graph_num_syms(g) + 1);
    bool any = false;
    for (uint32_t i = 0; sp && i < sp->n; i++)
        if (sp->hi[i] < 0) flags[sp->sym[i]] = 1, any = true;
    for (uint32_t i = 0; any && sp && i < sp->n_def; i++) /* over input symbols only (ir_sym_plan) */
        if (lower_expr_mentions(g, sp->def_expr[i], flags)) flags[sp->def_sym[i]] = 1;
    return any;
}

void lower_plan_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, int64_t *vals) {
    lower_sym_binding(g, sp, pick, true, vals);
}

bool lower_scratch_form_eval(const IrGraph *g, const LowerScratchForm *f, const int64_t *sym, int64_t *bytes) {
    *bytes = 0;
    for (uint32_t i = 0; i < f->n_terms; i++) {
        int64_t p = f->term[i].c, d;
        for (uint32_t k = 0; k < f->term[i].n_dims; k++) {
            if (!ir_expr_eval(g, f->term[i].dims[k], sym, &d)) return false;
            p *= d;
        }
        *bytes += p;
    }
    return true;
}

/* Whether form f mentions a symbol flagged in unb. */
static bool form_mentions(const IrGraph *g, const LowerScratchForm *f, const uint8_t *unb) {
    for (uint32_t i = 0; i < f->n_terms; i++)
        for (uint32_t k = 0; k < f->term[i].n_dims; k++)
            if (lower_expr_mentions(g, f->term[i].dims[k], unb)) return true;
    return false;
}

/* Whether v's size mentions a symbol without an upper bound (unb: by symbol id, or NULL). */
static bool value_unbounded(const IrGraph *g, IrValueId v, const uint8_t *unb) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!unb || !t || ir_type_is_container(g, t) || r == IR_RANK_UNKNOWN) return false;
    for (uint32_t k = 0; k < r; k++)
        if (lower_expr_mentions(g, ir_type_dims(g, t)[k], unb)) return true;
    return false;
}

/* Scratch of node n under a symbol plan with unbounded symbols: *form set and true when it
 * follows them (placed at run time); false with its bytes in *bytes when it does not, checked
 * at several values of them; IR_EUNSUPPORTED (reported) when it grows with them in no form the
 * target states, or its form disagrees with its bytes. */
static IrStatus scratch_kind(const IrGraph *g, const LowerPlanHooks *h, IrNodeId n, const int64_t *sym, const uint8_t *unb,
                             int64_t *bytes, bool *dyn, LowerScratchForm *form) {
    static const int64_t picks[] = {2, 7, 61, 1000};
    *dyn = false;
    *bytes = h->scratch ? h->scratch(g, n, sym, h->user) : 0;
    memset(form, 0, sizeof *form);
    bool follows = h->scratch_form && h->scratch_form(g, n, form) && form_mentions(g, form, unb);
    uint32_t ns = ir_graph_num_syms(g) + 1;
    int64_t *at = malloc(ns * sizeof *at);
    if (!at) return IR_ENOMEM;
    IrStatus s = IR_OK;
    for (size_t p = 0; p < sizeof picks / sizeof *picks && !s && h->scratch; p++) {
        lower_plan_binding(g, h->syms, picks[p], at);
        int64_t want = h->scratch(g, n, at, h->user), got = -1;
        if (follows && !lower_scratch_form_eval(g, form, at, &got)) got = -1;
        if (follows ? got != want : want != *bytes) {
            ir_diag_at_node(h->diag, g, n, IR_SEV_ERROR,
                            "cannot compile with symbols that have no upper bound: the scratch of %s grows with them "
                            "(bind the symbols with --input, or bound them: shape-infer{SYM=LO:HI})",
                            ir_op_name(ir_node_op(g, n)));
            s = IR_EUNSUPPORTED;
        }
    }
    free(at);
    *dyn = follows && !s;
    return s;
}

static void dyn_free(LowerMemPlan *plan) {
    for (uint32_t i = 0; plan->dyn && i < plan->n_dyn; i++) free(plan->dyn[i].pred);
    free(plan->dyn);
    plan->dyn = NULL;
    plan->n_dyn = 0;
}

/* A run-time block while it is planned: its slot, the block it aliases (-1), the nodes it lives
 * over, and where first fit puts it at the representative binding. */
typedef struct DynTmp {
    uint32_t slot, first, last;
    int32_t alias;
    int64_t rep_bytes, rep_off;
    LowerScratchForm scratch;
} DynTmp;

/* The unbounded symbols' value at which the run-time blocks are laid out once by first fit; any
 * value is sound (see plan_dyn), this one only decides which gaps are shared. */
#define DYN_REP_PICK 64

static int cmp_rep_off(const void *a, const void *b) {
    const DynTmp *x = *(const DynTmp *const *)a, *y = *(const DynTmp *const *)b;
    return x->rep_off < y->rep_off ? -1 : x->rep_off > y->rep_off ? 1 : x->first < y->first ? -1 : x->first > y->first;
}

/* The run-time blocks (see LowerDynBlock): each value sized by an unbounded symbol (dynv) and
 * each scratch that follows them (dyns[t], form in forms[t]); an in-place copy takes its
 * operand's block. The blocks are laid out once by first fit over their lifetimes at the
 * binding rep (unbounded symbols at DYN_REP_PICK), which orders every two blocks alive together;
 * at run time each block goes above the blocks alive with it that lie below it in that layout,
 * computed in the layout's order. Whatever the binding, blocks alive together then never
 * overlap, and at rep the layout is first fit's. last: each value's last use (node index). */
static IrStatus plan_dyn(const IrGraph *g, const LowerPlanHooks *h, const uint8_t *dynv, const uint8_t *dyns,
                         const LowerScratchForm *forms, const uint32_t *last, LowerMemPlan *plan) {
    uint32_t nv = ir_graph_num_values(g), cap = 0, t = 0, n = 0;
    for (uint32_t v = 1; v <= nv; v++) cap += dynv[v];
    for (IrNodeId m = ir_region_first(g, IR_ROOT_REGION); m; m = ir_node_next(g, m), t++) cap += dyns[t];
    if (!cap) return IR_OK;
    DynTmp *b = calloc(cap, sizeof *b), **order = calloc(cap, sizeof *order);
    int32_t *block = malloc((nv + 1) * sizeof *block), *index = malloc(cap * sizeof *index);
    int64_t *rep = malloc((ir_graph_num_syms(g) + 1) * sizeof *rep);
    uint32_t *live = malloc(cap * sizeof *live), *pred = malloc(cap * sizeof *pred);
    plan->dyn = calloc(cap, sizeof *plan->dyn);
    IrStatus s = b && order && block && index && rep && live && pred && plan->dyn ? IR_OK : IR_ENOMEM;
    if (!s) lower_plan_binding(g, h->syms, DYN_REP_PICK, rep);
    for (uint32_t v = 0; !s && v <= nv; v++) block[v] = -1;
    /* the blocks and their lifetimes, a copy in place extending its operand's */
    t = 0;
    for (IrNodeId m = ir_region_first(g, IR_ROOT_REGION); m && !s; m = ir_node_next(g, m), t++) {
        if (copy_in_place(g, m, last, t)) {
            IrValueId x = ir_node_operand(g, m, 0), y = ir_node_result(g, m, 0);
            if (dynv[x] && dynv[y] && block[x] >= 0) {
                b[n] = (DynTmp){.slot = y, .alias = block[x]};
                block[y] = block[x];
                if (last[y] > b[block[x]].last) b[block[x]].last = last[y];
                n++;
                continue;
            }
        }
        for (uint32_t i = 0; i <= ir_node_num_results(g, m); i++) {
            bool is_scratch = i == ir_node_num_results(g, m);
            uint32_t slot = is_scratch ? nv + 1 + t : ir_node_result(g, m, i);
            if (is_scratch ? !dyns[t] : !slot || !dynv[slot]) continue;
            DynTmp *d = &b[n];
            *d = (DynTmp){.slot = slot, .alias = -1, .first = t, .last = is_scratch ? t : last[slot] > t ? last[slot] : t};
            if (is_scratch) {
                d->scratch = forms[t];
                if (!lower_scratch_form_eval(g, &forms[t], rep, &d->rep_bytes)) d->rep_bytes = 0;
            } else {
                d->rep_bytes = (int64_t)value_bytes_at(g, slot, rep);
                block[slot] = (int32_t)n;
            }
            n++;
        }
    }
    /* first fit at rep, in creation order (live: sorted by offset) */
    uint32_t n_live = 0;
    for (uint32_t k = 0; !s && k < n; k++) {
        if (b[k].alias >= 0) continue;
        uint32_t j = 0;
        for (uint32_t q = 0; q < n_live; q++)
            if (b[live[q]].last >= b[k].first) live[j++] = live[q];
        n_live = j;
        int64_t size = (b[k].rep_bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN, off = 0;
        if (size <= 0) size = WS_ALIGN;
        uint32_t pos = 0;
        for (; pos < n_live; pos++) {
            if (b[live[pos]].rep_off - off >= size) break;
            int64_t end = b[live[pos]].rep_off + (b[live[pos]].rep_bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
            if (b[live[pos]].rep_bytes <= 0) end = b[live[pos]].rep_off + WS_ALIGN;
            if (end > off) off = end;
        }
        memmove(&live[pos + 1], &live[pos], (n_live - pos) * sizeof *live);
        live[pos] = k;
        n_live++;
        b[k].rep_off = off;
    }
    /* the blocks in layout order, then the aliases; preds: earlier blocks alive together */
    uint32_t n_root = 0;
    for (uint32_t k = 0; !s && k < n; k++)
        if (b[k].alias < 0) order[n_root++] = &b[k];
    if (!s) qsort(order, n_root, sizeof *order, cmp_rep_off);
    for (uint32_t k = 0, na = n_root; !s && k < n; k++)
        if (b[k].alias >= 0) order[na++] = &b[k];
    for (uint32_t k = 0; !s && k < n; k++) index[order[k] - b] = (int32_t)k;
    for (uint32_t k = 0; !s && k < n; k++) {
        const DynTmp *d = order[k];
        LowerDynBlock *o = &plan->dyn[k];
        *o = (LowerDynBlock){.slot = d->slot, .alias = d->alias >= 0 ? index[d->alias] : -1, .scratch = d->scratch};
        plan->offset[d->slot] = LOWER_OFF_DYN;
        plan->n_dyn++;
        uint32_t np = 0;
        for (uint32_t q = 0; d->alias < 0 && q < k; q++)
            if (order[q]->first <= d->last && d->first <= order[q]->last) pred[np++] = q;
        if (np && !(o->pred = malloc(np * sizeof *o->pred))) s = IR_ENOMEM;
        else if (np) memcpy(o->pred, pred, np * sizeof *pred), o->n_pred = np;
    }
    free(b), free(order), free(block), free(index), free(rep), free(live), free(pred);
    return s;
}

IrStatus lower_plan_memory(const IrGraph *g, const LowerPlanHooks *h, const int64_t *sym, LowerMemPlan *plan) {
    uint32_t nv = ir_graph_num_values(g), nn = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    memset(plan, 0, sizeof *plan);
    plan->n_slots = nv + 1 + nn;
    plan->offset = malloc(plan->n_slots * sizeof *plan->offset);
    plan->bytes = calloc(plan->n_slots, sizeof *plan->bytes);
    uint32_t *last = calloc(nv + 1, sizeof *last);
    Block *live = malloc((nv + 1) * sizeof *live);
    /* symbols without an upper bound: the values (dynv) and scratch (dyns, forms) they size */
    uint8_t *unb = h->syms ? malloc(ir_graph_num_syms(g) + 1) : NULL;
    bool any_unb = unb && lower_sym_unbounded(g, h->syms, unb);
    uint8_t *dynv = calloc(nv + 1, 1), *dyns = calloc(nn + 1, 1);
    LowerScratchForm *forms = any_unb ? calloc(nn + 1, sizeof *forms) : NULL;
    if (!plan->offset || !plan->bytes || !last || !live || (h->syms && !unb) || !dynv || !dyns || (any_unb && !forms)) {
        free(last), free(live), free(unb), free(dynv), free(dyns), free(forms);
        lower_plan_free(plan);
        return IR_ENOMEM;
    }
    for (uint32_t v = 1; any_unb && v <= nv; v++) dynv[v] = lower_in_workspace(g, v) && value_unbounded(g, v, unb);
    for (uint32_t v = 0; v < plan->n_slots; v++) plan->offset[v] = -1;
    uint32_t t = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n), t++)
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) last[ir_node_operand(g, n, i)] = t;
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) last[ir_graph_output(g, i)] = UINT32_MAX;
    /* in-place Concats (CPU): each input's place inside the output, taken when the first input
     * is produced; owner[v] is the Concat node of input v */
    uint32_t *uses = calloc(nv + 1, sizeof *uses);
    IrNodeId *owner = calloc(nv + 1, sizeof *owner);
    int64_t *part = calloc(nv + 1, sizeof *part);
    if (!uses || !owner || !part) {
        free(uses), free(owner), free(part), free(last), free(live), free(unb), free(dynv), free(dyns), free(forms);
        lower_plan_free(plan);
        return IR_ENOMEM;
    }
    IrStatus st = IR_OK;
    if (h->concat_in_place) ir_graph_count_uses(g, uses);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && h->concat_in_place; n = ir_node_next(g, n)) {
        if (!lower_concat_in_place(g, n, uses)) continue;
        int64_t pos = 0;
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            owner[v] = n;
            part[v] = pos;
            pos += (int64_t)value_bytes_at(g, v, sym);
        }
    }
    uint32_t n_live = 0;
    t = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !st; n = ir_node_next(g, n), t++) {
        uint32_t k = 0; /* drop blocks whose value died before this node */
        for (uint32_t j = 0; j < n_live; j++)
            if (live[j].last >= t) live[k++] = live[j];
        n_live = k;
        /* (not when the copy is an in-place Concat's part: that has its place inside the Concat's
         * output, where the copy must write it) */
        if (copy_in_place(g, n, last, t) && plan->offset[ir_node_operand(g, n, 0)] >= 0 && !owner[ir_node_result(g, n, 0)] &&
            !dynv[ir_node_result(g, n, 0)]) {
            IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
            plan->offset[y] = plan->offset[x];
            plan->bytes[y] = (int64_t)value_bytes_at(g, y, sym);
            for (uint32_t j = 0; j < n_live; j++) /* x's block now lives as long as y */
                if (live[j].off <= plan->offset[x] && plan->offset[x] < live[j].off + live[j].size && last[y] > live[j].last)
                    live[j].last = last[y];
            continue;
        }
        int64_t scratch = 0;
        bool dyn_scratch = false;
        if (any_unb) st = scratch_kind(g, h, n, sym, unb, &scratch, &dyn_scratch, &forms[t]);
        else scratch = h->scratch ? h->scratch(g, n, sym, h->user) : 0;
        dyns[t] = dyn_scratch;
        for (uint32_t i = 0; i <= ir_node_num_results(g, n) && !st; i++) {
            bool is_scratch = i == ir_node_num_results(g, n);
            uint32_t v = is_scratch ? nv + 1 + t : ir_node_result(g, n, i);
            if (is_scratch ? scratch == 0 || dyn_scratch : !lower_in_workspace(g, v) || dynv[v]) continue;
            if (!is_scratch && plan->offset[v] >= 0) continue; /* an in-place Concat's output, placed already */
            IrValueId whole = 0;
            if (!is_scratch && owner[v]) { /* place the Concat's output now, v inside it */
                whole = ir_node_result(g, owner[v], 0);
                if (plan->offset[whole] >= 0) {
                    plan->offset[v] = plan->offset[whole] + part[v];
                    plan->bytes[v] = (int64_t)value_bytes_at(g, v, sym);
                    continue;
                }
                v = whole;
            }
            int64_t bytes = is_scratch ? scratch : (int64_t)value_bytes_at(g, v, sym);
            int64_t size = (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
            if (size == 0) size = WS_ALIGN;
            /* blocks of 64 KiB and more hold 64 bytes more: the value sits at the block's start
             * or 64 bytes in, at the 128-byte phase residual_phase asks for (a contraction's
             * output against its residual), without moving to another gap (a fresh region is
             * memory no earlier kernel of the run touched, slower to write than the phase gains) */
            int64_t slack = size >= (64 << 10) ? 64 : 0;
            size += slack;
            plan->unplanned += (size_t)size;
            int64_t phase = is_scratch || whole || !slack ? -1 : residual_phase(g, n, plan->offset, bytes);
            /* live is sorted by offset: take the first gap that fits */
            int64_t off = 0;
            uint32_t pos = 0;
            for (; pos < n_live; pos++) {
                if (live[pos].off - off >= size) break;
                if (live[pos].off + live[pos].size > off) off = live[pos].off + live[pos].size;
            }
            int64_t shift = phase >= 0 && off % 128 != phase ? 64 : 0;
            memmove(&live[pos + 1], &live[pos], (n_live - pos) * sizeof *live);
            live[pos] = (Block){off, size, is_scratch ? t : last[v] > t ? last[v] : t};
            n_live++;
            plan->offset[v] = off + shift;
            plan->bytes[v] = bytes;
            if (whole) {
                IrValueId r = ir_node_result(g, n, i);
                plan->offset[r] = off + part[r];
                plan->bytes[r] = (int64_t)value_bytes_at(g, r, sym);
            }
            if ((size_t)(off + size) > plan->peak) plan->peak = (size_t)(off + size);
        }
    }
    if (!st && any_unb) st = plan_dyn(g, h, dynv, dyns, forms, last, plan);
    free(uses);
    free(owner);
    free(part);
    free(last);
    free(live);
    free(unb);
    free(dynv);
    free(dyns);
    free(forms);
    if (st) lower_plan_free(plan);
    return st;
}

void lower_plan_free(LowerMemPlan *plan) {
    free(plan->offset);
    free(plan->bytes);
    dyn_free(plan);
    plan->offset = NULL;
    plan->bytes = NULL;
}
