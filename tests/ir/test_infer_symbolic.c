/* Shape rules over symbolic dims: Conv-like ops and recurrent layers whose weight dims are
 * symbols (a model whose weights are inputs), with the facts that tie weight dims to the
 * attributes (kernel_shape, hidden_size), and Slice with constant bounds on a symbolic dim
 * (min/max expressions); each checked by evaluating at bindings against the static rule.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

typedef struct Inferred {
    IrGraph *g;
    IrShapeFacts *facts;
    IrTypeId out[4];
} Inferred;

/* Parses text and infers the types of the node producing value `name`, with facts recorded. */
static Inferred infer_node(const char *text, const char *name) {
    TuDiag d;
    tu_diag_init(&d);
    Inferred r = {0};
    r.g = tu_parse(text, "t.ir", &d);
    cr_assert(r.g, "parse failed: %s", tu_diag_text(&d));
    IrValueId v = ir_value_find(r.g, name, strlen(name));
    cr_assert(v, "no value %s", name);
    cr_assert_eq(ir_shape_facts_create(r.g, &r.facts), IR_OK);
    IrStatus s = ir_node_infer_types_ex(r.g, ir_value_def_node(r.g, v), &d.diag, r.out, r.facts);
    cr_assert_eq(s, IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    return r;
}

static void inferred_free(Inferred *r) {
    ir_shape_facts_destroy(r->facts);
    ir_graph_destroy(r->g);
}

static int64_t *binding(IrGraph *g, const char *const *names, const int64_t *vals, uint32_t n) {
    int64_t *sym = malloc((ir_graph_num_syms(g) + 1) * sizeof *sym);
    for (uint32_t i = 0; i <= ir_graph_num_syms(g); i++) sym[i] = -1;
    for (uint32_t i = 0; i < n; i++) sym[ir_sym_find(g, names[i], strlen(names[i]))] = vals[i];
    return sym;
}

static int64_t dim_at(const Inferred *r, uint32_t out, uint32_t k, const int64_t *sym) {
    int64_t v = -1;
    cr_assert(ir_type_rank(r->g, r->out[out]) != IR_RANK_UNKNOWN && k < ir_type_rank(r->g, r->out[out]));
    IrExprId e = ir_type_dims(r->g, r->out[out])[k];
    cr_assert_neq(ir_expr_kind(r->g, e), IR_EXPR_UNKNOWN, "dim %u of result %u is unknown", k, out);
    cr_assert(ir_expr_eval(r->g, e, sym, &v), "dim %u of result %u does not evaluate", k, out);
    return v;
}

/* Whether the facts require a == b (either order) for the two expressions printed as pa, pb. */
static bool requires_equal(const Inferred *r, const char *pa, const char *pb) {
    for (uint32_t i = 0; i < ir_shape_facts_num_required(r->facts); i++) {
        IrConstraint c = ir_shape_facts_required(r->facts, i, NULL);
        if (c.kind != IR_CONSTRAINT_EQ) continue;
        IrStrBuf a, b;
        ir_strbuf_init(&a), ir_strbuf_init(&b);
        ir_expr_print(r->g, c.a, &a);
        ir_expr_print(r->g, c.b, &b);
        bool hit = (!strcmp(a.data, pa) && !strcmp(b.data, pb)) || (!strcmp(a.data, pb) && !strcmp(b.data, pa));
        ir_strbuf_free(&a), ir_strbuf_free(&b);
        if (hit) return true;
    }
    return false;
}

/* ConvTranspose's output is s*(H-1) + d*(K-1) + 1 - pads + output_padding with the kernel K a
 * weight symbol; checked against that formula at several bindings. */
Test(infer_symbolic, conv_transpose_with_symbolic_kernel) {
    Inferred r = infer_node("symbol H, W, K, L\n"
                            "graph @g(%x: f32[1, 3, H, W], %w: f32[3, 2, K, L]) {\n"
                            "  %y = ConvTranspose(%x, %w) {strides = [3, 2], dilations = [2, 1], pads = [1, 0, 2, 1], "
                            "output_padding = [1, 0]}\n"
                            "  return %y\n"
                            "}\n",
                            "y");
    const char *names[] = {"H", "W", "K", "L"};
    int64_t cases[][4] = {{5, 4, 3, 3}, {1, 9, 2, 5}, {8, 8, 1, 1}};
    for (int c = 0; c < 3; c++) {
        int64_t *sym = binding(r.g, names, cases[c], 4);
        int64_t h = cases[c][0], w = cases[c][1], k = cases[c][2], l = cases[c][3];
        cr_expect_eq(dim_at(&r, 0, 1, sym), 2);
        cr_expect_eq(dim_at(&r, 0, 2, sym), 3 * (h - 1) + 2 * (k - 1) + 1 - (1 + 2) + 1);
        cr_expect_eq(dim_at(&r, 0, 3, sym), 2 * (w - 1) + (l - 1) + 1 - (0 + 1));
        free(sym);
    }
    inferred_free(&r);
}

/* Conv without kernel_shape takes the weight's symbolic dims; with it, the weight's dims must
 * equal it (facts), and so must the input channels the weight's times group. */
Test(infer_symbolic, conv_kernel_from_weight_symbols_and_facts) {
    Inferred r = infer_node("symbol H, W, K, L\n"
                            "graph @g(%x: f32[1, 4, H, W], %w: f32[6, 2, K, L]) {\n"
                            "  %y = Conv(%x, %w) {strides = [2, 1], pads = [1, 1, 1, 0], group = 2}\n"
                            "  return %y\n"
                            "}\n",
                            "y");
    const char *names[] = {"H", "W", "K", "L"};
    int64_t v[] = {11, 7, 3, 2};
    int64_t *sym = binding(r.g, names, v, 4);
    cr_expect_eq(dim_at(&r, 0, 1, sym), 6);
    cr_expect_eq(dim_at(&r, 0, 2, sym), (11 + 2 - 3) / 2 + 1);
    cr_expect_eq(dim_at(&r, 0, 3, sym), (7 + 1 - 2) / 1 + 1);
    free(sym);
    inferred_free(&r);

    r = infer_node("symbol H, W, K, L, C, D\n"
                   "graph @g(%x: f32[1, C, H, W], %w: f32[5, D, K, L]) {\n"
                   "  %y = Conv(%x, %w) {kernel_shape = [3, 2], group = 1}\n"
                   "  return %y\n"
                   "}\n",
                   "y");
    cr_expect(requires_equal(&r, "K", "3"));
    cr_expect(requires_equal(&r, "L", "2"));
    cr_expect(requires_equal(&r, "C", "D"));
    const char *n2[] = {"H", "W"};
    int64_t v2[] = {6, 6};
    sym = binding(r.g, n2, v2, 2);
    cr_expect_eq(dim_at(&r, 0, 2, sym), 4); /* the attribute's kernel, not the symbol */
    cr_expect_eq(dim_at(&r, 0, 3, sym), 5);
    free(sym);
    inferred_free(&r);
}

/* ConvInteger shares the window arithmetic: symbolic kernel and VALID padding. */
Test(infer_symbolic, conv_integer_symbolic_kernel) {
    Inferred r = infer_node("symbol H, W, K, L\n"
                            "graph @g(%x: u8[1, 1, H, W], %w: u8[1, 1, K, L]) {\n"
                            "  %y = ConvInteger(%x, %w) {pads = [1, 1, 1, 1]}\n"
                            "  return %y\n"
                            "}\n",
                            "y");
    const char *names[] = {"H", "W", "K", "L"};
    int64_t v[] = {3, 4, 2, 2};
    int64_t *sym = binding(r.g, names, v, 4);
    cr_expect_eq(ir_type_dtype(r.g, r.out[0]), IR_DTYPE_I32);
    cr_expect_eq(dim_at(&r, 0, 2, sym), 3 + 2 - 2 + 1);
    cr_expect_eq(dim_at(&r, 0, 3, sym), 4 + 2 - 2 + 1);
    free(sym);
    inferred_free(&r);
}

/* LSTM: W, R, B, initial states and P tied to hidden_size, the direction count and the batch,
 * and the input size of W to X's. */
Test(infer_symbolic, lstm_weight_facts) {
    Inferred r = infer_node("symbol S, N, I, A, B, C, D, E, F, G, P, Q\n"
                            "graph @g(%x: f32[S, N, I], %w: f32[A, B, C], %r: f32[1, D, E], %b: f32[1, F], "
                            "%h0: f32[1, G, 3], %p: f32[P, Q]) {\n"
                            "  %y, %yh, %yc = LSTM(%x, %w, %r, %b, _, %h0, _, %p) {hidden_size = 3}\n"
                            "  return %y, %yh, %yc\n"
                            "}\n",
                            "y");
    cr_expect(requires_equal(&r, "A", "1"));
    cr_expect(requires_equal(&r, "B", "12"));
    cr_expect(requires_equal(&r, "C", "I"));
    cr_expect(requires_equal(&r, "D", "12"));
    cr_expect(requires_equal(&r, "E", "3"));
    cr_expect(requires_equal(&r, "F", "24"));
    cr_expect(requires_equal(&r, "G", "N"));
    cr_expect(requires_equal(&r, "P", "1"));
    cr_expect(requires_equal(&r, "Q", "9"));
    const char *names[] = {"S", "N"};
    int64_t v[] = {7, 2};
    int64_t *sym = binding(r.g, names, v, 2);
    cr_expect_eq(dim_at(&r, 0, 0, sym), 7);
    cr_expect_eq(dim_at(&r, 0, 2, sym), 2);
    cr_expect_eq(dim_at(&r, 0, 3, sym), 3);
    cr_expect_eq(dim_at(&r, 2, 2, sym), 3);
    free(sym);
    inferred_free(&r);
}

/* GRU without hidden_size takes it from R's last dim, a symbol. */
Test(infer_symbolic, gru_hidden_from_r) {
    Inferred r = infer_node("symbol S, N, I, H\n"
                            "graph @g(%x: f32[S, N, I], %w: f32[2, 6, I], %r: f32[2, 6, H]) {\n"
                            "  %y, %yh = GRU(%x, %w, %r) {direction = \"bidirectional\"}\n"
                            "  return %y, %yh\n"
                            "}\n",
                            "y");
    const char *names[] = {"S", "N", "H"};
    int64_t v[] = {4, 3, 2};
    int64_t *sym = binding(r.g, names, v, 3);
    cr_expect_eq(dim_at(&r, 0, 1, sym), 2);
    cr_expect_eq(dim_at(&r, 0, 3, sym), 2);
    cr_expect_eq(dim_at(&r, 1, 2, sym), 2);
    free(sym);
    cr_expect(requires_equal(&r, "H*3", "6"));
    inferred_free(&r);
}

/* The static rule of Slice on one axis: numpy's clamping. */
static int64_t slice_ref(int64_t dim, int64_t s, int64_t e, int64_t step) {
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        return e > s ? (e - s + step - 1) / step : 0;
    }
    s = s < -1 ? -1 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    return s > e ? (s - e - step - 1) / -step : 0;
}

/* Slice with constant starts/ends/steps on a symbolic dim gives an expression (min/max where the
 * clamping needs them) equal to the static rule at every binding, the empty one included. */
Test(infer_symbolic, slice_bounds_on_a_symbolic_dim) {
    static const int64_t cases[][3] = {
        {1, INT64_MAX, 1}, {0, -1, 1}, {-3, INT64_MAX, 1}, {2, 5, 1},     {-4, -1, 2}, {1, 100, 3},
        {0, 0, 1},         {5, 2, 1},  {-1, INT64_MIN, -1}, {-2, 0, -1}, {7, 1, -2},  {INT64_MAX, -100, -3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "symbol D\ngraph @g(%%x: f32[2, D]) {\n  const %%s: i64[1] = [%lld]\n  const %%e: i64[1] = [%lld]\n"
                 "  const %%a: i64[1] = [1]\n  const %%p: i64[1] = [%lld]\n  %%y = Slice(%%x, %%s, %%e, %%a, %%p)\n"
                 "  return %%y\n}\n",
                 (long long)cases[i][0], (long long)cases[i][1], (long long)cases[i][2]);
        Inferred r = infer_node(text, "y");
        const char *names[] = {"D"};
        for (int64_t dim = 0; dim <= 9; dim++) {
            int64_t *sym = binding(r.g, names, &dim, 1);
            cr_expect_eq(dim_at(&r, 0, 1, sym), slice_ref(dim, cases[i][0], cases[i][1], cases[i][2]),
                         "case %zu at D=%lld", i, (long long)dim);
            cr_expect_eq(dim_at(&r, 0, 0, sym), 2);
            free(sym);
        }
        inferred_free(&r);
    }
    /* x[:, 1:] and x[:, :-1] print as the user would write them */
    Inferred r = infer_node("symbol D\ngraph @g(%x: f32[D]) {\n  const %s: i64[1] = [0]\n  const %e: i64[1] = [-1]\n"
                            "  %y = Slice(%x, %s, %e)\n  return %y\n}\n",
                            "y");
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_expr_print(r.g, ir_type_dims(r.g, r.out[0])[0], &b);
    cr_expect_str_eq(b.data, "max(D - 1, 0)");
    ir_strbuf_free(&b);
    inferred_free(&r);
}
