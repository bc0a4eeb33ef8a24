/* gen_graph: writes a synthetic, verifiable text IR graph of about N nodes for benchmarks.
 *
 * The graph is a chain of transformer-like blocks over x: f32[B, 8] (B a symbol): MatMul, Add,
 * Relu, Mul, Reshape (constant shape), Transpose, Reshape, Concat, Softmax, Reshape,
 * ReduceMean, Add, LayerNormalization; every block has its own small weights, every node a
 * name and result types, and every 16th block is followed by an If with two small regions.
 * Filler Relu nodes make the count exactly N. The graph is built with the builder API,
 * verified, and printed canonically, so the file is exactly what `irtool fmt` would print.
 * Output is deterministic (fixed PRNG seed).
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 8             /* feature width */
#define BLOCK_NODES 13  /* nodes per block */
#define IF_NODES 6      /* ReduceSum, Greater, If, then: Relu + Mul, else: Neg */
#define IF_EVERY 16     /* an If after every 16th block */

typedef struct Gen {
    IrGraph *g;
    uint64_t rng;
    IrTypeId t_bd, t_b2d, t_b24, t_b42, t_b28, t_scalar, t_bool, t_w, t_vec;
    IrValueId shape3, shape2, shape4, zero; /* constants shared by all blocks */
    uint32_t nodes;
} Gen;

static float rnd(Gen *G) {
    /* xorshift64*: deterministic, good enough for weights */
    G->rng ^= G->rng >> 12;
    G->rng ^= G->rng << 25;
    G->rng ^= G->rng >> 27;
    uint64_t v = G->rng * 2685821657736338717ull;
    return (float)((double)(v >> 40) / (double)(1ull << 24)) - 0.5f;
}

static IrValueId add_const(Gen *G, const char *name, IrTypeId t, const void *data, size_t nbytes) {
    IrConstId c = ir_const_create(G->g, t, data, nbytes);
    return ir_graph_add_const_value(G->g, name, c);
}

static IrValueId add_random_const(Gen *G, const char *name, IrTypeId t, size_t numel, float base) {
    float buf[D * D];
    for (size_t i = 0; i < numel; i++) buf[i] = base + rnd(G) * 0.25f;
    return add_const(G, name, t, buf, numel * sizeof(float));
}

/* One node with a single result named `res` (in region r), its type and a node name. */
static IrValueId node(Gen *G, IrRegionId r, IrOp op, uint32_t nops, const IrValueId *ops,
                      const char *res, IrTypeId t, const char *name, IrNodeId *out) {
    const char *names[1] = {res};
    IrNodeId n = ir_node_create(G->g, r, op, nops, ops, 1, names, &t);
    if (!n) return 0;
    ir_node_set_name(G->g, n, name);
    G->nodes++;
    if (out) *out = n;
    return ir_node_result(G->g, n, 0);
}

static void set_int(Gen *G, IrNodeId n, const char *name, int64_t v) {
    IrAttrValue a = {.kind = IR_ATTR_INT, .i = v};
    ir_node_set_attr(G->g, n, name, &a);
}

static void set_ints(Gen *G, IrNodeId n, const char *name, const int64_t *v, uint32_t count) {
    IrAttrValue a = {.kind = IR_ATTR_INTS, .count = count, .ints = v};
    ir_node_set_attr(G->g, n, name, &a);
}

static void set_float(Gen *G, IrNodeId n, const char *name, double v) {
    IrAttrValue a = {.kind = IR_ATTR_FLOAT, .f = v};
    ir_node_set_attr(G->g, n, name, &a);
}

static IrValueId block(Gen *G, uint32_t i, IrValueId h) {
    char p[32], vn[64], nn[64];
    snprintf(p, sizeof p, "b%u", i);
#define V(s) (snprintf(vn, sizeof vn, "%s.%s", p, s), vn)
#define N(s) (snprintf(nn, sizeof nn, "block%u/%s", i, s), nn)
    IrValueId w = add_random_const(G, V("w"), G->t_w, D * D, 0.0f);
    IrValueId bias = add_random_const(G, V("bias"), G->t_vec, D, 0.0f);
    IrValueId gamma = add_random_const(G, V("gamma"), G->t_vec, D, 1.0f);
    IrValueId beta = add_random_const(G, V("beta"), G->t_vec, D, 0.0f);
    float s = 0.5f + rnd(G);
    IrValueId scale = add_const(G, V("scale"), G->t_scalar, &s, sizeof s);
    IrNodeId n = 0;
    IrValueId mm = node(G, 1, IR_OP_MAT_MUL, 2, (IrValueId[]){h, w}, V("mm"), G->t_bd, N("matmul"), NULL);
    IrValueId add = node(G, 1, IR_OP_ADD, 2, (IrValueId[]){mm, bias}, V("add"), G->t_bd, N("bias"), NULL);
    IrValueId relu = node(G, 1, IR_OP_RELU, 1, &add, V("relu"), G->t_bd, N("relu"), NULL);
    IrValueId mul = node(G, 1, IR_OP_MUL, 2, (IrValueId[]){relu, scale}, V("mul"), G->t_bd, N("scale"), NULL);
    IrValueId r3 = node(G, 1, IR_OP_RESHAPE, 2, (IrValueId[]){mul, G->shape3}, V("r3"), G->t_b24, N("split"), NULL);
    IrValueId tr = node(G, 1, IR_OP_TRANSPOSE, 1, &r3, V("tr"), G->t_b42, N("transpose"), &n);
    set_ints(G, n, "perm", (const int64_t[]){0, 2, 1}, 3);
    IrValueId r2 = node(G, 1, IR_OP_RESHAPE, 2, (IrValueId[]){tr, G->shape2}, V("r2"), G->t_bd, N("merge"), NULL);
    IrValueId cat = node(G, 1, IR_OP_CONCAT, 2, (IrValueId[]){r2, h}, V("cat"), G->t_b2d, N("concat"), &n);
    set_int(G, n, "axis", 1);
    IrValueId sm = node(G, 1, IR_OP_SOFTMAX, 1, &cat, V("sm"), G->t_b2d, N("softmax"), &n);
    set_int(G, n, "axis", -1);
    IrValueId r4 = node(G, 1, IR_OP_RESHAPE, 2, (IrValueId[]){sm, G->shape4}, V("r4"), G->t_b28, N("heads"), NULL);
    IrValueId red = node(G, 1, IR_OP_REDUCE_MEAN, 1, &r4, V("red"), G->t_bd, N("pool"), &n);
    set_ints(G, n, "axes", (const int64_t[]){1}, 1);
    set_int(G, n, "keepdims", 0);
    IrValueId res = node(G, 1, IR_OP_ADD, 2, (IrValueId[]){red, h}, V("res"), G->t_bd, N("residual"), NULL);
    IrValueId ln = node(G, 1, IR_OP_LAYER_NORMALIZATION, 3, (IrValueId[]){res, gamma, beta}, V("ln"), G->t_bd,
                        N("layernorm"), &n);
    set_int(G, n, "axis", -1);
    set_float(G, n, "epsilon", 1e-5);
    return ln;
#undef V
#undef N
}

/* h' = If(sum(h) > 0) { Relu(h) * scale } else { Neg(h) } */
static IrValueId if_group(Gen *G, uint32_t i, IrValueId h, IrValueId scale) {
    char vn[64], nn[64];
#define V(s) (snprintf(vn, sizeof vn, "c%u.%s", i, s), vn)
#define N(s) (snprintf(nn, sizeof nn, "cond%u/%s", i, s), nn)
    IrNodeId n = 0;
    IrValueId sum = node(G, 1, IR_OP_REDUCE_SUM, 1, &h, V("sum"), G->t_scalar, N("sum"), &n);
    set_int(G, n, "keepdims", 0);
    IrValueId pos = node(G, 1, IR_OP_GREATER, 2, (IrValueId[]){sum, G->zero}, V("pos"), G->t_bool, N("is_positive"), NULL);
    IrValueId out = node(G, 1, IR_OP_IF, 1, &pos, V("out"), G->t_bd, N("branch"), &n);
    IrRegionId then_r = ir_node_region_at(G->g, n, 0), else_r = ir_node_region_at(G->g, n, 1);
    IrValueId t = node(G, then_r, IR_OP_RELU, 1, &h, V("t"), G->t_bd, N("then_relu"), NULL);
    IrValueId ts = node(G, then_r, IR_OP_MUL, 2, (IrValueId[]){t, scale}, V("ts"), G->t_bd, N("then_scale"), NULL);
    ir_region_set_outputs(G->g, then_r, 1, &ts);
    IrValueId e = node(G, else_r, IR_OP_NEG, 1, &h, V("e"), G->t_bd, N("else_neg"), NULL);
    ir_region_set_outputs(G->g, else_r, 1, &e);
    return out;
#undef V
#undef N
}

static IrStatus build(Gen *G, uint32_t target) {
    IrGraph *g = G->g;
    ir_graph_set_name(g, "bench");
    IrSymId B = ir_sym_declare(g, "B");
    IrExprId b = ir_expr_sym(g, B);
    IrConstraint c = {.kind = IR_CONSTRAINT_RANGE, .a = b, .lo = 1, .hi = 4096};
    ir_graph_add_constraint(g, &c);
    IrExprId d8 = ir_expr_const(g, D), d16 = ir_expr_const(g, 2 * D), d2 = ir_expr_const(g, 2),
             d4 = ir_expr_const(g, 4);
    G->t_bd = ir_type_tensor(g, IR_DTYPE_F32, 2, (IrExprId[]){b, d8});
    G->t_b2d = ir_type_tensor(g, IR_DTYPE_F32, 2, (IrExprId[]){b, d16});
    G->t_b24 = ir_type_tensor(g, IR_DTYPE_F32, 3, (IrExprId[]){b, d2, d4});
    G->t_b42 = ir_type_tensor(g, IR_DTYPE_F32, 3, (IrExprId[]){b, d4, d2});
    G->t_b28 = ir_type_tensor(g, IR_DTYPE_F32, 3, (IrExprId[]){b, d2, d8});
    G->t_scalar = ir_type_tensor(g, IR_DTYPE_F32, 0, NULL);
    G->t_bool = ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL);
    G->t_w = ir_type_tensor(g, IR_DTYPE_F32, 2, (IrExprId[]){d8, d8});
    G->t_vec = ir_type_tensor(g, IR_DTYPE_F32, 1, &d8);
    IrTypeId t_s3 = ir_type_tensor_i64(g, IR_DTYPE_I64, 1, (const int64_t[]){3});
    IrTypeId t_s2 = ir_type_tensor_i64(g, IR_DTYPE_I64, 1, (const int64_t[]){2});
    G->shape3 = add_const(G, "shape_b2x4", t_s3, (const int64_t[]){0, 2, 4}, 24);
    G->shape2 = add_const(G, "shape_b8", t_s2, (const int64_t[]){0, D}, 16);
    G->shape4 = add_const(G, "shape_b2x8", t_s3, (const int64_t[]){0, 2, D}, 24);
    float zero = 0.0f;
    G->zero = add_const(G, "zero", G->t_scalar, &zero, sizeof zero);
    IrValueId h = ir_region_add_arg(g, IR_ROOT_REGION, "x", G->t_bd);
    for (uint32_t i = 0; G->nodes + BLOCK_NODES <= target; i++) {
        h = block(G, i, h);
        if (i % IF_EVERY == IF_EVERY - 1 && G->nodes + IF_NODES <= target) {
            char sn[32];
            snprintf(sn, sizeof sn, "b%u.scale", i);
            h = if_group(G, i, h, ir_value_find(g, sn, strlen(sn)));
        }
    }
    for (uint32_t k = 0; G->nodes < target; k++) {
        char vn[32], nn[32];
        snprintf(vn, sizeof vn, "tail%u", k);
        snprintf(nn, sizeof nn, "tail/relu%u", k);
        h = node(G, 1, IR_OP_RELU, 1, &h, vn, G->t_bd, nn, NULL);
    }
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &h);
    return ir_graph_status(g);
}

static void usage(void) {
    fprintf(stderr, "usage: gen_graph NODES OUT.ir\n"
                    "  writes a verifiable synthetic text IR graph with exactly NODES nodes (>= 1)\n");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        usage();
        return 2;
    }
    char *end;
    unsigned long target = strtoul(argv[1], &end, 10);
    if (*end || target < 1 || target > 50000000ul) {
        usage();
        return 2;
    }
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    Gen G = {.rng = 0x9e3779b97f4a7c15ull};
    if (ir_graph_create(&G.g) != IR_OK) {
        fprintf(stderr, "gen_graph: out of memory\n");
        return 1;
    }
    IrStatus st = build(&G, (uint32_t)target);
    if (st == IR_OK) st = ir_verify(G.g, &diag);
    if (st != IR_OK) {
        fprintf(stderr, "gen_graph: building the graph failed: %s\n", ir_status_name(st));
        ir_graph_destroy(G.g);
        return 1;
    }
    IrStrBuf b;
    ir_strbuf_init(&b);
    st = ir_print_text(G.g, &b);
    if (st == IR_OK) st = ir_write_file_atomic(argv[2], b.data, b.len, &diag);
    if (st == IR_OK)
        printf("gen_graph: %s: %u nodes, %u values, %zu bytes\n", argv[2], ir_graph_num_nodes(G.g),
               ir_graph_num_values(G.g), b.len);
    else
        fprintf(stderr, "gen_graph: cannot write %s: %s\n", argv[2], ir_status_name(st));
    ir_strbuf_free(&b);
    ir_graph_destroy(G.g);
    return st == IR_OK ? 0 : 1;
}
