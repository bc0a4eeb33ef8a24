/* Symbolic dimension expressions: canonical simplification (so equal expressions share an id),
 * printing with minimal parentheses, and evaluation with bound symbols.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static IrGraph *g;
static IrSymId B, S;
static IrExprId eB, eS;

static void setup(void) {
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    /* declared S first so canonical order is by name, not by declaration */
    S = ir_sym_declare(g, "S");
    B = ir_sym_declare(g, "B");
    eB = ir_expr_sym(g, B);
    eS = ir_expr_sym(g, S);
}
static void teardown(void) { ir_graph_destroy(g); }

static IrExprId c(int64_t v) { return ir_expr_const(g, v); }
static IrExprId bin(IrExprKind k, IrExprId a, IrExprId b) { return ir_expr_binary(g, k, a, b); }

static char *str(IrExprId e) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_expr_print(g, e, &b);
    return b.data;
}

#define ASSERT_PRINTS(e, text)                                                                     \
    do {                                                                                           \
        char *s_ = str(e);                                                                         \
        cr_assert_str_eq(s_, text);                                                                \
        free(s_);                                                                                  \
    } while (0)

TestSuite(expr, .init = setup, .fini = teardown);

Test(expr, interning_gives_equal_ids) {
    cr_assert_eq(ir_sym_declare(g, "B"), B, "declaring twice is idempotent");
    cr_assert_eq(ir_sym_find(g, "B", 1), B);
    cr_assert_eq(ir_sym_find(g, "Q", 1), 0);
    cr_assert_str_eq(ir_sym_name(g, S), "S");
    cr_assert_eq(ir_graph_num_syms(g), 2);
    cr_assert_eq(c(7), c(7));
    cr_assert_neq(c(7), c(8));
    cr_assert_eq(ir_expr_sym(g, B), eB);
    cr_assert_eq(ir_expr_unknown(g), ir_expr_unknown(g));
    cr_assert_eq(ir_expr_kind(g, c(3)), IR_EXPR_CONST);
    cr_assert_eq(ir_expr_const_value(g, c(-5)), -5);
    cr_assert_eq(ir_expr_kind(g, eB), IR_EXPR_SYM);
    cr_assert_eq(ir_expr_sym_id(g, eB), B);
    int64_t v;
    cr_assert(!ir_expr_is_const(g, eB, &v));
    cr_assert(ir_expr_is_const(g, c(9), &v) && v == 9);
}

Test(expr, constants_fold) {
    int64_t v;
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_ADD, c(2), c(3)), &v) && v == 5);
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_SUB, c(2), c(3)), &v) && v == -1);
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_MUL, c(6), c(7)), &v) && v == 42);
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_DIV, c(7), c(2)), &v) && v == 3);
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_DIV, c(-7), c(2)), &v) && v == -4, "floor division");
    cr_assert(ir_expr_is_const(g, bin(IR_EXPR_MOD, c(-7), c(2)), &v) && v == 1, "floor modulo");
    /* division by a zero constant is not folded (and never traps) */
    IrExprId d0 = bin(IR_EXPR_DIV, c(4), c(0));
    cr_assert_neq(d0, 0);
    cr_assert(!ir_expr_is_const(g, d0, &v));
    /* overflow is not folded either */
    IrExprId big = bin(IR_EXPR_MUL, c(INT64_MAX), c(2));
    cr_assert(!ir_expr_is_const(g, big, &v));
}

Test(expr, identities) {
    cr_assert_eq(bin(IR_EXPR_ADD, eB, c(0)), eB, "x+0");
    cr_assert_eq(bin(IR_EXPR_ADD, c(0), eB), eB, "0+x");
    cr_assert_eq(bin(IR_EXPR_SUB, eB, c(0)), eB, "x-0");
    cr_assert_eq(bin(IR_EXPR_MUL, eB, c(1)), eB, "x*1");
    cr_assert_eq(bin(IR_EXPR_MUL, c(1), eB), eB, "1*x");
    cr_assert_eq(bin(IR_EXPR_MUL, eB, c(0)), c(0), "x*0");
    cr_assert_eq(bin(IR_EXPR_MUL, c(0), eS), c(0), "0*x");
    cr_assert_eq(bin(IR_EXPR_DIV, eB, c(1)), eB, "x/1");
    cr_assert_eq(bin(IR_EXPR_SUB, eB, eB), c(0), "x-x");
    cr_assert_eq(bin(IR_EXPR_DIV, eS, eS), c(1), "x/x");
    cr_assert_eq(bin(IR_EXPR_MOD, eS, c(1)), c(0), "x%%1");
    cr_assert_eq(ir_expr_kind(g, bin(IR_EXPR_ADD, eB, ir_expr_unknown(g))), IR_EXPR_UNKNOWN, "x+? is ?");
    cr_assert_eq(bin(IR_EXPR_ADD, 0, eB), 0, "a missing operand gives 0");
    cr_assert_eq(bin((IrExprKind)99, eB, eS), 0, "a bad kind gives 0");
}

Test(expr, commutative_canonical_order) {
    IrExprId sb = bin(IR_EXPR_MUL, eS, eB), bs = bin(IR_EXPR_MUL, eB, eS);
    cr_assert_eq(sb, bs, "S*B and B*S are the same expression");
    ASSERT_PRINTS(sb, "B*S");
    cr_assert_eq(bin(IR_EXPR_ADD, eS, eB), bin(IR_EXPR_ADD, eB, eS));
    ASSERT_PRINTS(bin(IR_EXPR_ADD, eS, eB), "B + S");
    /* constants go last */
    cr_assert_eq(bin(IR_EXPR_ADD, c(1), eB), bin(IR_EXPR_ADD, eB, c(1)));
    ASSERT_PRINTS(bin(IR_EXPR_ADD, c(1), eB), "B + 1");
    ASSERT_PRINTS(bin(IR_EXPR_MUL, c(8), eS), "S*8");
    /* like terms combine */
    cr_assert_eq(bin(IR_EXPR_ADD, eS, eS), bin(IR_EXPR_MUL, eS, c(2)), "S+S == S*2");
    cr_assert_eq(bin(IR_EXPR_SUB, bin(IR_EXPR_ADD, eS, eB), eB), eS, "(S+B)-B == S");
    /* non-commutative ops keep their order */
    cr_assert_neq(bin(IR_EXPR_SUB, eS, eB), bin(IR_EXPR_SUB, eB, eS));
    cr_assert_neq(bin(IR_EXPR_DIV, eS, eB), bin(IR_EXPR_DIV, eB, eS));
    ASSERT_PRINTS(bin(IR_EXPR_DIV, eS, eB), "S/B");
}

Test(expr, nested_constant_folding) {
    IrExprId b1 = bin(IR_EXPR_ADD, eB, c(1));
    IrExprId b3 = bin(IR_EXPR_ADD, eB, c(3));
    cr_assert_eq(bin(IR_EXPR_ADD, b1, c(2)), b3, "(B+1)+2 == B+3");
    cr_assert_eq(bin(IR_EXPR_ADD, c(2), b1), b3, "2+(B+1) == B+3");
    ASSERT_PRINTS(b3, "B + 3");
    IrExprId s2 = bin(IR_EXPR_MUL, eS, c(2));
    cr_assert_eq(bin(IR_EXPR_MUL, s2, c(4)), bin(IR_EXPR_MUL, eS, c(8)), "(S*2)*4 == S*8");
    IrExprId back = bin(IR_EXPR_ADD, b1, c(-1));
    cr_assert_eq(back, eB, "(B+1)+(-1) == B");
    /* exact division cancels, inexact stays a division */
    IrExprId s16b = bin(IR_EXPR_MUL, bin(IR_EXPR_MUL, eS, eB), c(16));
    cr_assert_eq(bin(IR_EXPR_DIV, s16b, bin(IR_EXPR_MUL, eB, c(8))), s2, "(16*B*S)/(8*B) == S*2");
    cr_assert_eq(bin(IR_EXPR_MOD, bin(IR_EXPR_MUL, eS, c(8)), c(8)), c(0), "(S*8)%%8 == 0");
    ASSERT_PRINTS(bin(IR_EXPR_DIV, eS, c(8)), "S/8");
}

Test(expr, printing_minimal_parentheses) {
    IrExprId b1 = bin(IR_EXPR_ADD, eB, c(1));
    ASSERT_PRINTS(b1, "B + 1");
    /* a sum as the left operand of a division needs parentheses */
    ASSERT_PRINTS(bin(IR_EXPR_DIV, b1, eS), "(B + 1)/S");
    ASSERT_PRINTS(bin(IR_EXPR_MOD, b1, c(8)), "(B + 1)%8");
    ASSERT_PRINTS(bin(IR_EXPR_DIV, eS, c(8)), "S/8");
    ASSERT_PRINTS(bin(IR_EXPR_MOD, eS, c(8)), "S%8");
    /* right operands of equal precedence need them (left-associative), left ones do not */
    ASSERT_PRINTS(bin(IR_EXPR_DIV, eS, bin(IR_EXPR_DIV, eB, c(2))), "S/(B/2)");
    ASSERT_PRINTS(bin(IR_EXPR_DIV, bin(IR_EXPR_DIV, eS, eB), c(2)), "S/B/2");
    ASSERT_PRINTS(bin(IR_EXPR_DIV, eS, bin(IR_EXPR_MUL, eB, c(2))), "S/(B*2)");
    ASSERT_PRINTS(bin(IR_EXPR_MUL, bin(IR_EXPR_DIV, eS, c(8)), c(8)), "S/8*8");
    ASSERT_PRINTS(bin(IR_EXPR_ADD, bin(IR_EXPR_MUL, eB, eS), c(1)), "B*S + 1");
    /* products distribute over sums in the canonical form: no parentheses needed */
    ASSERT_PRINTS(bin(IR_EXPR_MUL, b1, eS), "B*S + S");
    ASSERT_PRINTS(bin(IR_EXPR_ADD, bin(IR_EXPR_DIV, b1, c(2)), eS), "S + (B + 1)/2");
    ASSERT_PRINTS(c(-3), "-3");
    ASSERT_PRINTS(ir_expr_unknown(g), "?");
}

/* Whatever the canonical form, it must parse back to the same printed form and value. */
Test(expr, printed_form_parses_back_to_the_same_expression) {
    IrExprId b1 = bin(IR_EXPR_ADD, eB, c(1));
    IrExprId es[] = {
        bin(IR_EXPR_SUB, eS, eB),
        bin(IR_EXPR_SUB, eS, bin(IR_EXPR_SUB, eB, c(1))),
        bin(IR_EXPR_SUB, bin(IR_EXPR_SUB, eS, eB), c(1)),
        bin(IR_EXPR_MUL, b1, eS),
        bin(IR_EXPR_DIV, b1, eS),
        bin(IR_EXPR_MUL, bin(IR_EXPR_DIV, eS, c(8)), c(8)),
        bin(IR_EXPR_MOD, eS, c(8)),
        bin(IR_EXPR_SUB, c(0), eS),
        bin(IR_EXPR_MUL, bin(IR_EXPR_SUB, eS, c(3)), bin(IR_EXPR_SUB, eB, c(2))),
        bin(IR_EXPR_DIV, eS, bin(IR_EXPR_DIV, eB, c(2))),
        bin(IR_EXPR_MAX, bin(IR_EXPR_SUB, eS, bin(IR_EXPR_MIN, c(2), eB)), c(0)),
        bin(IR_EXPR_ADD, bin(IR_EXPR_MIN, eS, eB), c(1)),
    };
    int64_t vals[3] = {0};
    vals[S] = 40;
    vals[B] = 6;
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        char *p = str(es[i]);
        char text[512];
        snprintf(text, sizeof text, "symbol S, B\ngraph @g(%%x: f32[%s]) {\n  return %%x\n}\n", p);
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *pg = tu_parse(text, "e.ir", &d);
        cr_assert_not_null(pg, "'%s' does not parse: %s", p, tu_diag_text(&d));
        IrExprId e2 = ir_type_dims(pg, ir_value_type(pg, ir_graph_input(pg, 0)))[0];
        IrStrBuf b;
        ir_strbuf_init(&b);
        ir_expr_print(pg, e2, &b);
        cr_assert_str_eq(b.data, p, "print(parse('%s'))", p);
        int64_t v1, v2, pv[3] = {0};
        pv[ir_sym_find(pg, "S", 1)] = 40;
        pv[ir_sym_find(pg, "B", 1)] = 6;
        cr_assert(ir_expr_eval(g, es[i], vals, &v1) && ir_expr_eval(pg, e2, pv, &v2));
        cr_assert_eq(v1, v2, "'%s' keeps its value", p);
        ir_strbuf_free(&b);
        ir_graph_destroy(pg);
        tu_diag_free(&d);
        free(p);
    }
    int64_t v;
    cr_assert(ir_expr_eval(g, es[1], vals, &v) && v == 40 - 5, "S - (B - 1)");
    cr_assert(ir_expr_eval(g, es[8], vals, &v) && v == 37 * 4, "(S - 3)*(B - 2)");
}

/* min/max: constants fold, operands a constant apart pick one, the others keep one order (so
 * they intern alike), print as calls and evaluate. */
Test(expr, min_max) {
    cr_assert_eq(bin(IR_EXPR_MIN, c(3), c(-2)), c(-2));
    cr_assert_eq(bin(IR_EXPR_MAX, c(3), c(-2)), c(3));
    cr_assert_eq(bin(IR_EXPR_MIN, eS, eS), eS);
    IrExprId s1 = bin(IR_EXPR_SUB, eS, c(1));
    cr_assert_eq(bin(IR_EXPR_MIN, eS, s1), s1, "min(S, S - 1) is S - 1");
    cr_assert_eq(bin(IR_EXPR_MAX, s1, eS), eS, "max(S - 1, S) is S");
    cr_assert_eq(bin(IR_EXPR_MIN, eS, eB), bin(IR_EXPR_MIN, eB, eS));
    cr_assert_eq(bin(IR_EXPR_MAX, c(0), eS), bin(IR_EXPR_MAX, eS, c(0)));
    ASSERT_PRINTS(bin(IR_EXPR_MAX, bin(IR_EXPR_SUB, eS, bin(IR_EXPR_MIN, c(2), eS)), c(0)), "max(S - min(S, 2), 0)");
    ASSERT_PRINTS(bin(IR_EXPR_MUL, bin(IR_EXPR_MIN, eS, eB), c(4)), "min(B, S)*4");
    int64_t vals[3] = {0}, out;
    vals[S] = 5;
    vals[B] = 9;
    cr_assert(ir_expr_eval(g, bin(IR_EXPR_MIN, eS, eB), vals, &out) && out == 5);
    cr_assert(ir_expr_eval(g, bin(IR_EXPR_MAX, bin(IR_EXPR_SUB, eS, eB), c(0)), vals, &out) && out == 0);
    /* substituting a symbol folds them */
    IrExprId m = bin(IR_EXPR_MAX, bin(IR_EXPR_SUB, eS, c(3)), c(0));
    cr_assert_eq(ir_expr_substitute(g, m, S, 2), c(0));
    cr_assert_eq(ir_expr_substitute(g, m, S, 10), c(7));
}

Test(expr, evaluation) {
    int64_t vals[3] = {0};
    vals[S] = 64;
    vals[B] = 3;
    int64_t out;
    IrExprId e = bin(IR_EXPR_ADD, bin(IR_EXPR_MUL, eS, bin(IR_EXPR_ADD, eB, c(1))), c(5));
    cr_assert(ir_expr_eval(g, e, vals, &out));
    cr_assert_eq(out, 64 * 4 + 5);
    cr_assert(ir_expr_eval(g, bin(IR_EXPR_DIV, eS, c(8)), vals, &out) && out == 8);
    cr_assert(ir_expr_eval(g, bin(IR_EXPR_MOD, eS, c(7)), vals, &out) && out == 1);
    cr_assert(ir_expr_eval(g, bin(IR_EXPR_SUB, eB, eS), vals, &out) && out == -61);
    /* division by a symbol bound to zero */
    vals[B] = 0;
    cr_assert(!ir_expr_eval(g, bin(IR_EXPR_DIV, eS, eB), vals, &out), "division by zero is false");
    cr_assert(!ir_expr_eval(g, bin(IR_EXPR_MOD, eS, eB), vals, &out), "modulo by zero is false");
    cr_assert(!ir_expr_eval(g, bin(IR_EXPR_DIV, c(4), c(0)), vals, &out), "constant division by zero");
    /* unbound symbol (negative value) and unknowns */
    vals[B] = -1;
    cr_assert(!ir_expr_eval(g, bin(IR_EXPR_ADD, eB, c(1)), vals, &out));
    cr_assert(!ir_expr_eval(g, eS, NULL, &out), "no bindings at all");
    cr_assert(!ir_expr_eval(g, ir_expr_unknown(g), vals, &out));
    cr_assert(ir_expr_eval(g, c(12), NULL, &out) && out == 12, "constants need no bindings");
    cr_assert(!ir_expr_eval(g, 0, vals, &out), "id 0");
    cr_assert(!ir_expr_eval(g, 100000, vals, &out), "out-of-range id");
    /* overflow during evaluation */
    vals[B] = INT64_MAX;
    cr_assert(!ir_expr_eval(g, bin(IR_EXPR_MUL, eB, c(2)), vals, &out), "overflow is false");
}

Test(expr, types_intern_with_dims) {
    IrExprId dims[2] = {eB, bin(IR_EXPR_MUL, eS, c(2))};
    IrTypeId t1 = ir_type_tensor(g, IR_DTYPE_F32, 2, dims);
    IrExprId dims2[2] = {eB, bin(IR_EXPR_MUL, c(2), eS)};
    cr_assert_eq(ir_type_tensor(g, IR_DTYPE_F32, 2, dims2), t1, "types intern over canonical dims");
    cr_assert_neq(ir_type_tensor(g, IR_DTYPE_F16, 2, dims), t1);
    int64_t n;
    cr_assert(!ir_type_numel(g, t1, &n), "symbolic type has no element count");
    int64_t cd[3] = {2, 3, 4};
    IrTypeId t2 = ir_type_tensor_i64(g, IR_DTYPE_I8, 3, cd);
    cr_assert(ir_type_numel(g, t2, &n) && n == 24);
    int64_t qd[2] = {-1, 5};
    IrTypeId t3 = ir_type_tensor_i64(g, IR_DTYPE_F32, 2, qd);
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t1, &b);
    ir_strbuf_puts(&b, " ");
    ir_type_print(g, t3, &b);
    ir_strbuf_puts(&b, " ");
    ir_type_print(g, ir_type_tensor(g, IR_DTYPE_BOOL, IR_RANK_UNKNOWN, NULL), &b);
    ir_strbuf_puts(&b, " ");
    ir_type_print(g, ir_type_tensor(g, IR_DTYPE_F64, 0, NULL), &b);
    ir_strbuf_puts(&b, " ");
    ir_type_print(g, 0, &b);
    cr_assert_str_eq(b.data, "f32[B, S*2] f32[?, 5] bool[*] f64[] ?");
    ir_strbuf_free(&b);
    cr_assert_eq(ir_type_rank(g, 0), IR_RANK_UNKNOWN);
    cr_assert_eq(ir_type_dtype(g, 0), IR_DTYPE_NONE);
}
