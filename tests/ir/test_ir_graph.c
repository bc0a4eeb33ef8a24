/* The builder API: graphs, values, constants, nodes, attributes, regions, traversal and use
 * counting, built programmatically and checked through the accessors, the verifier and the
 * printer. Run under ASan this also checks that a graph owns (and frees) all of its memory.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static IrGraph *new_graph(void) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    cr_assert_not_null(g);
    return g;
}

static IrTypeId t2(IrGraph *g, IrDType dt, int64_t a, int64_t b) {
    int64_t d[2] = {a, b};
    return ir_type_tensor_i64(g, dt, 2, d);
}

static IrNodeId unary(IrGraph *g, IrRegionId r, IrOp op, IrValueId x, const char *name, IrTypeId t) {
    const char *names[1] = {name};
    return ir_node_create(g, r, op, 1, &x, 1, names, t ? &t : NULL);
}

static IrNodeId binary(IrGraph *g, IrRegionId r, IrOp op, IrValueId a, IrValueId b, const char *name,
                       IrTypeId t) {
    IrValueId ops[2] = {a, b};
    const char *names[1] = {name};
    return ir_node_create(g, r, op, 2, ops, 1, names, t ? &t : NULL);
}

static void verify_ok(IrGraph *g) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_verify(g, &d.diag);
    cr_assert_eq(s, IR_OK, "verify failed: %s", tu_diag_text(&d));
    cr_assert_eq(d.diag.n_errors, 0);
    tu_diag_free(&d);
}

Test(graph, empty_graph) {
    IrGraph *g = new_graph();
    cr_assert_eq(ir_graph_status(g), IR_OK);
    cr_assert_eq(ir_graph_num_nodes(g), 0);
    cr_assert_eq(ir_graph_num_values(g), 0);
    cr_assert_eq(ir_graph_num_regions(g), 1, "just the root region");
    cr_assert_eq(ir_region_parent(g, IR_ROOT_REGION), 0);
    cr_assert_eq(ir_graph_num_inputs(g), 0);
    cr_assert_eq(ir_graph_num_outputs(g), 0);
    cr_assert_eq(ir_graph_walk_next(g, 0), 0);
    cr_assert_str_eq(ir_graph_name(g), "");
    cr_assert_null(ir_graph_source_file(g));
    cr_assert_gt(ir_graph_memory_bytes(g), 0);
    ir_graph_set_name(g, "main2");
    cr_assert_str_eq(ir_graph_name(g), "main2");
    ir_graph_set_source_file(g, "x/y.ir");
    cr_assert_str_eq(ir_graph_source_file(g), "x/y.ir");
    ir_graph_set_source_file(g, NULL);
    cr_assert_null(ir_graph_source_file(g));
    ir_graph_destroy(g);
    ir_graph_destroy(NULL); /* a no-op */
}

Test(graph, strings_intern) {
    IrGraph *g = new_graph();
    IrStrId a = ir_str_intern_cstr(g, "hello");
    cr_assert_neq(a, 0);
    cr_assert_eq(ir_str_intern(g, "hello world", 5), a, "interning by length");
    cr_assert_str_eq(ir_str(g, a), "hello");
    cr_assert_eq(ir_str_find(g, "hello", 5), a);
    cr_assert_eq(ir_str_find(g, "nope", 4), 0);
    cr_assert_eq(ir_str_intern_cstr(g, ""), 0, "the empty string is id 0");
    cr_assert_str_eq(ir_str(g, 0), "");
    /* many strings force rehashing; ids stay stable */
    char buf[32];
    IrStrId ids[2000];
    for (int i = 0; i < 2000; i++) {
        snprintf(buf, sizeof buf, "s%d", i);
        ids[i] = ir_str_intern_cstr(g, buf);
    }
    for (int i = 0; i < 2000; i++) {
        snprintf(buf, sizeof buf, "s%d", i);
        cr_assert_eq(ir_str_find(g, buf, strlen(buf)), ids[i]);
        cr_assert_str_eq(ir_str(g, ids[i]), buf);
    }
    cr_assert_eq(ir_str_find(g, "hello", 5), a);
    ir_graph_destroy(g);
}

Test(graph, args_consts_and_value_names) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 2, 3);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrValueId anon = ir_region_add_arg(g, IR_ROOT_REGION, NULL, t);
    cr_assert_neq(x, 0);
    cr_assert_neq(anon, 0);
    cr_assert_eq(ir_graph_num_inputs(g), 2);
    cr_assert_eq(ir_graph_input(g, 0), x);
    cr_assert_eq(ir_graph_input(g, 1), anon);
    cr_assert_eq(ir_value_kind(g, x), IR_VALUE_ARG);
    cr_assert_eq(ir_value_def_region(g, x), IR_ROOT_REGION);
    cr_assert_eq(ir_value_def_index(g, anon), 1);
    cr_assert_eq(ir_value_type(g, x), t);
    cr_assert_str_eq(ir_value_name(g, x), "x");
    cr_assert_str_eq(ir_value_name(g, anon), "t1", "generated names are t1, t2, ...");
    cr_assert_eq(ir_region_add_arg(g, IR_ROOT_REGION, "x", t), 0, "names are unique");
    cr_assert_eq(ir_graph_num_inputs(g), 2);
    /* a generated name skips names already taken */
    IrValueId t2v = ir_region_add_arg(g, IR_ROOT_REGION, "t2", t);
    IrValueId gen = ir_region_add_arg(g, IR_ROOT_REGION, NULL, t);
    cr_assert_str_eq(ir_value_name(g, t2v), "t2");
    cr_assert_str_eq(ir_value_name(g, gen), "t3");

    float data[6] = {1, 2, 3, 4, 5, 6};
    IrConstId c = ir_const_create(g, t, data, sizeof data);
    cr_assert_neq(c, 0);
    cr_assert_neq(ir_const_data(g, c), (const void *)data, "data is copied");
    cr_assert_eq(memcmp(ir_const_data(g, c), data, sizeof data), 0);
    cr_assert_eq((uintptr_t)ir_const_data(g, c) % 64, 0, "constant data is 64-byte aligned");
    cr_assert_eq(ir_const_nbytes(g, c), sizeof data);
    cr_assert_eq(ir_const_type(g, c), t);
    data[0] = 99; /* the graph's copy is independent */
    cr_assert_eq(((const float *)ir_const_data(g, c))[0], 1.0f);
    IrValueId w = ir_graph_add_const_value(g, "w", c);
    cr_assert_eq(ir_value_kind(g, w), IR_VALUE_CONST);
    cr_assert_eq(ir_value_const(g, w), c);
    cr_assert_eq(ir_value_type(g, w), t, "a constant value has its data's type");
    cr_assert_eq(ir_graph_num_const_values(g), 1);
    cr_assert_eq(ir_graph_const_value(g, 0), w);
    cr_assert_eq(ir_graph_add_const_value(g, "w", c), 0, "constant names are unique too");
    cr_assert_eq(ir_graph_add_const_value(g, "w2", 0), 0, "no constant");
    IrStrId path;
    uint64_t off;
    cr_assert(!ir_const_external(g, c, &path, &off));
    ir_const_set_external(g, c, ir_str_intern_cstr(g, "w.bin"), 128);
    cr_assert(ir_const_external(g, c, &path, &off));
    cr_assert_str_eq(ir_str(g, path), "w.bin");
    cr_assert_eq(off, 128);

    cr_assert_eq(ir_value_find(g, "x", 1), x);
    cr_assert_eq(ir_value_find(g, "w", 1), w);
    cr_assert_eq(ir_value_find(g, "nothing", 7), 0);
    ir_graph_destroy(g);
}

Test(graph, rename) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 1, 1);
    IrValueId a = ir_region_add_arg(g, IR_ROOT_REGION, "a", t);
    IrValueId b = ir_region_add_arg(g, IR_ROOT_REGION, "b", t);
    cr_assert_eq(ir_value_rename(g, a, "alpha"), IR_OK);
    cr_assert_str_eq(ir_value_name(g, a), "alpha");
    cr_assert_eq(ir_value_find(g, "alpha", 5), a);
    cr_assert_eq(ir_value_find(g, "a", 1), 0, "the old name is free");
    cr_assert_eq(ir_value_rename(g, b, "alpha"), IR_EINVAL, "taken");
    cr_assert_str_eq(ir_value_name(g, b), "b");
    cr_assert_eq(ir_value_rename(g, a, "alpha"), IR_OK, "renaming to its own name is fine");
    cr_assert_eq(ir_value_rename(g, b, "a"), IR_OK, "a freed name can be reused");
    cr_assert_eq(ir_value_find(g, "a", 1), b);
    cr_assert_eq(ir_value_rename(g, b, ""), IR_EINVAL, "empty names are rejected");
    cr_assert_eq(ir_graph_status(g), IR_OK);
    ir_graph_destroy(g);
}

Test(graph, nodes_operands_results_and_metadata) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 2, 3);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId n = unary(g, IR_ROOT_REGION, IR_OP_RELU, x, "y", t);
    cr_assert_neq(n, 0);
    cr_assert(ir_node_alive(g, n));
    cr_assert_eq(ir_node_op(g, n), IR_OP_RELU);
    cr_assert_eq(ir_node_region(g, n), IR_ROOT_REGION);
    cr_assert_eq(ir_node_num_operands(g, n), 1);
    cr_assert_eq(ir_node_operand(g, n, 0), x);
    cr_assert_eq(ir_node_num_results(g, n), 1);
    IrValueId y = ir_node_result(g, n, 0);
    cr_assert_str_eq(ir_value_name(g, y), "y");
    cr_assert_eq(ir_value_kind(g, y), IR_VALUE_RESULT);
    cr_assert_eq(ir_value_def_node(g, y), n);
    cr_assert_eq(ir_value_def_index(g, y), 0);
    cr_assert_eq(ir_value_type(g, y), t);
    cr_assert_eq(ir_node_num_regions(g, n), 0);
    cr_assert_eq(ir_graph_num_nodes(g), 1);

    /* generated result names and unknown types */
    IrNodeId m = unary(g, IR_ROOT_REGION, IR_OP_NEG, y, NULL, 0);
    IrValueId z = ir_node_result(g, m, 0);
    cr_assert_str_eq(ir_value_name(g, z), "t1");
    cr_assert_eq(ir_value_type(g, z), 0);
    ir_value_set_type(g, z, t);
    cr_assert_eq(ir_value_type(g, z), t);

    /* absent operand (0) and operand replacement */
    IrValueId ops[3] = {x, 0, 0};
    const char *cn[1] = {"clipped"};
    IrNodeId clip = ir_node_create(g, IR_ROOT_REGION, IR_OP_CLIP, 3, ops, 1, cn, &t);
    cr_assert_eq(ir_node_operand(g, clip, 1), 0);
    ir_node_set_operand(g, clip, 0, z);
    cr_assert_eq(ir_node_operand(g, clip, 0), z);

    /* name, loc, provenance, text position */
    cr_assert_str_eq(ir_node_name(g, n), "");
    ir_node_set_name(g, n, "relu_1");
    cr_assert_str_eq(ir_node_name(g, n), "relu_1");
    IrLoc none = ir_node_loc(g, n);
    cr_assert_eq(none.file, 0);
    IrLoc loc = {ir_str_intern_cstr(g, "model.py"), 12, 7};
    ir_node_set_loc(g, n, loc);
    IrLoc got = ir_node_loc(g, n);
    cr_assert_str_eq(ir_str(g, got.file), "model.py");
    cr_assert_eq(got.line, 12);
    cr_assert_eq(got.col, 7);
    IrStrId prov[2] = {ir_str_intern_cstr(g, "orig/relu"), ir_str_intern_cstr(g, "orig/bias")};
    ir_node_set_provenance(g, n, 2, prov);
    cr_assert_eq(ir_node_num_provenance(g, n), 2);
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, n, 0)), "orig/relu");
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, n, 1)), "orig/bias");
    uint32_t line, col;
    ir_node_text_pos(g, n, &line, &col);
    cr_assert_eq(line, 0);
    ir_node_set_text_pos(g, n, 4, 9);
    ir_node_text_pos(g, n, &line, &col);
    cr_assert(line == 4 && col == 9);

    /* a node may not reuse a live value name */
    IrGraph *g2 = new_graph();
    IrValueId x2 = ir_region_add_arg(g2, IR_ROOT_REGION, "x", t2(g2, IR_DTYPE_F32, 1, 1));
    const char *dup[1] = {"x"};
    cr_assert_eq(ir_node_create(g2, IR_ROOT_REGION, IR_OP_RELU, 1, &x2, 1, dup, NULL), 0);
    cr_assert_eq(ir_value_find(g2, "x", 1), x2, "the original keeps its name");
    ir_graph_destroy(g2);

    /* bad op / bad region are rejected */
    cr_assert_eq(ir_node_create(g, IR_ROOT_REGION, IR_OP_NONE, 0, NULL, 0, NULL, NULL), 0);
    cr_assert_eq(ir_node_create(g, 999, IR_OP_RELU, 1, &x, 1, NULL, NULL), 0);
    cr_assert_eq(ir_graph_status(g), IR_OK, "rejected calls do not poison the graph");
    ir_graph_destroy(g);
}

Test(graph, attributes_sorted_and_replaced) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 1, 4);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId n = unary(g, IR_ROOT_REGION, IR_OP_CONV, x, "y", 0);
    IrAttrValue v = {.kind = IR_ATTR_INT, .i = 2};
    ir_node_set_attr(g, n, "group", &v);
    int64_t ks[2] = {3, 3};
    IrAttrValue kv = {.kind = IR_ATTR_INTS, .count = 2, .ints = ks};
    ir_node_set_attr(g, n, "kernel_shape", &kv);
    IrAttrValue sv = {.kind = IR_ATTR_STRING, .s = ir_str_intern_cstr(g, "SAME_UPPER")};
    ir_node_set_attr(g, n, "auto_pad", &sv);
    int64_t pads[4] = {1, 1, 1, 1};
    IrAttrValue pv = {.kind = IR_ATTR_INTS, .count = 4, .ints = pads};
    ir_node_set_attr(g, n, "pads", &pv);
    ks[0] = 77; /* arrays are copied */
    cr_assert_eq(ir_node_num_attrs(g, n), 4);
    const char *order[4] = {"auto_pad", "group", "kernel_shape", "pads"};
    for (uint32_t i = 0; i < 4; i++) cr_assert_str_eq(ir_str(g, ir_node_attr_name(g, n, i)), order[i]);
    IrAttrValue got;
    cr_assert(ir_node_attr(g, n, "kernel_shape", &got));
    cr_assert_eq(got.kind, IR_ATTR_INTS);
    cr_assert_eq(got.count, 2);
    cr_assert(got.ints[0] == 3 && got.ints[1] == 3);
    /* replacing keeps the count and the order */
    IrAttrValue v4 = {.kind = IR_ATTR_INT, .i = 4};
    ir_node_set_attr(g, n, "group", &v4);
    cr_assert_eq(ir_node_num_attrs(g, n), 4);
    cr_assert_eq(ir_node_attr_int(g, n, "group", NULL), 4);
    cr_assert_str_eq(ir_str(g, ir_node_attr_name(g, n, 1)), "group");
    /* typed getters fall back to the op table's defaults */
    bool found;
    cr_assert_str_eq(ir_node_attr_string(g, n, "auto_pad", &found), "SAME_UPPER");
    cr_assert(found);
    ir_node_set_attr(g, n, "zzz_last", &v);
    cr_assert_str_eq(ir_str(g, ir_node_attr_name(g, n, 4)), "zzz_last");
    IrNodeId r = unary(g, IR_ROOT_REGION, IR_OP_LEAKY_RELU, x, "l", 0);
    cr_assert_float_eq(ir_node_attr_float(g, r, "alpha", &found), 0.01, 1e-9);
    cr_assert(found, "default from the op table");
    cr_assert(!ir_node_attr(g, r, "alpha", NULL), "defaults are not set attributes");
    ir_node_attr_int(g, r, "nonexistent", &found);
    cr_assert(!found);
    cr_assert_null(ir_node_attr_string(g, r, "nonexistent", &found));
    /* float attributes are f32, like ONNX */
    IrAttrValue fv = {.kind = IR_ATTR_FLOAT, .f = 0.1};
    ir_node_set_attr(g, r, "alpha", &fv);
    cr_assert_eq(ir_node_attr_float(g, r, "alpha", NULL), (double)0.1f);
    /* attributes on one node survive adding attributes to another (slices are copied) */
    IrAttrValue e = {.kind = IR_ATTR_INT, .i = 1};
    ir_node_set_attr(g, n, "dilations", &kv);
    ir_node_set_attr(g, r, "beta", &e);
    cr_assert_eq(ir_node_num_attrs(g, n), 6);
    cr_assert_str_eq(ir_str(g, ir_node_attr_name(g, n, 1)), "dilations");
    cr_assert_eq(ir_node_attr_int(g, n, "group", NULL), 4);
    cr_assert_eq(ir_node_num_attrs(g, r), 2);
    ir_graph_destroy(g);
}

/* Builds: x -> If(pred){then: Relu; Neg} {else: Abs} -> Sigmoid, checks structure and walk. */
Test(graph, regions_and_walk_order) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 2, 2);
    IrTypeId tb = ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrValueId p = ir_region_add_arg(g, IR_ROOT_REGION, "p", tb);
    IrNodeId first = unary(g, IR_ROOT_REGION, IR_OP_IDENTITY, x, "x1", t);
    IrValueId x1 = ir_node_result(g, first, 0);
    const char *ifn[1] = {"r"};
    IrNodeId iff = ir_node_create(g, IR_ROOT_REGION, IR_OP_IF, 1, &p, 1, ifn, &t);
    cr_assert_eq(ir_node_num_regions(g, iff), 2, "If gets its two regions, empty");
    IrRegionId th = ir_node_region_at(g, iff, 0), el = ir_node_region_at(g, iff, 1);
    cr_assert(th > 1 && el > 1 && th != el);
    cr_assert_eq(ir_region_parent(g, th), iff);
    cr_assert_eq(ir_region_first(g, th), 0);
    cr_assert_eq(ir_graph_num_regions(g), 3);
    char rn[32];
    cr_assert(ir_op_region_name(IR_OP_IF, 1, rn, sizeof rn));
    cr_assert_str_eq(rn, "else_branch");
    IrNodeId t1 = unary(g, th, IR_OP_RELU, x1, "a", t);
    IrNodeId t2n = unary(g, th, IR_OP_NEG, ir_node_result(g, t1, 0), "b", t);
    IrNodeId e1 = unary(g, el, IR_OP_ABS, x, "c", t);
    IrValueId bo = ir_node_result(g, t2n, 0), co = ir_node_result(g, e1, 0);
    ir_region_set_outputs(g, th, 1, &bo);
    ir_region_set_outputs(g, el, 1, &co);
    IrNodeId last = unary(g, IR_ROOT_REGION, IR_OP_SIGMOID, ir_node_result(g, iff, 0), "y", t);
    IrValueId y = ir_node_result(g, last, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    cr_assert_eq(ir_graph_num_nodes(g), 6);
    IrNodeId want[6] = {first, iff, t1, t2n, e1, last};
    IrNodeId n = 0;
    for (int i = 0; i < 6; i++) {
        n = ir_graph_walk_next(g, n);
        cr_assert_eq(n, want[i], "walk step %d", i);
    }
    cr_assert_eq(ir_graph_walk_next(g, n), 0, "walk ends");
    cr_assert_eq(ir_region_first(g, th), t1);
    cr_assert_eq(ir_region_last(g, th), t2n);
    cr_assert_eq(ir_node_next(g, t1), t2n);
    cr_assert_eq(ir_node_prev(g, t2n), t1);
    cr_assert_eq(ir_node_prev(g, t1), 0);

    /* a Loop gets a body region whose args can be added */
    IrTypeId ti = ir_type_tensor(g, IR_DTYPE_I64, 0, NULL);
    const char *ln[1] = {"lo"};
    IrValueId lops[3] = {0, p, y};
    IrNodeId loop = ir_node_create_before(g, last, IR_OP_LOOP, 3, lops, 1, ln, &t);
    cr_assert_eq(ir_node_next(g, loop), last, "create_before places it");
    IrRegionId body = ir_node_region_at(g, loop, 0);
    IrValueId bi = ir_region_add_arg(g, body, "i", ti);
    IrValueId bc = ir_region_add_arg(g, body, "cond", tb);
    IrValueId ba = ir_region_add_arg(g, body, "acc", t);
    cr_assert_eq(ir_region_num_args(g, body), 3);
    cr_assert_eq(ir_region_arg(g, body, 2), ba);
    cr_assert_eq(ir_value_def_region(g, bi), body);
    IrValueId bouts[2] = {bc, ba};
    ir_region_set_outputs(g, body, 2, bouts);
    cr_assert_eq(ir_region_num_outputs(g, body), 2);
    cr_assert_eq(ir_region_output(g, body, 1), ba);
    ir_graph_destroy(g);
}

Test(graph, erase_move_and_uses) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 2, 2);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    IrNodeId a = unary(g, IR_ROOT_REGION, IR_OP_RELU, x, "a", t);
    IrValueId av = ir_node_result(g, a, 0);
    IrNodeId b = binary(g, IR_ROOT_REGION, IR_OP_ADD, av, av, "b", t);
    IrValueId bv = ir_node_result(g, b, 0);
    IrNodeId c = unary(g, IR_ROOT_REGION, IR_OP_NEG, x, "c", t);
    IrValueId cv = ir_node_result(g, c, 0);
    IrValueId outs[2] = {bv, av};
    ir_region_set_outputs(g, IR_ROOT_REGION, 2, outs);

    uint32_t nv = ir_graph_num_values(g);
    uint32_t *counts = calloc(nv + 1, sizeof *counts);
    ir_graph_count_uses(g, counts);
    cr_assert_eq(counts[x], 2, "x: operand of a and c");
    cr_assert_eq(counts[av], 3, "a: twice in Add, once as output");
    cr_assert_eq(counts[bv], 1, "b: graph output");
    cr_assert_eq(counts[cv], 0, "c is dead");

    /* erase the dead node: its name becomes free */
    ir_node_erase(g, c);
    cr_assert(!ir_node_alive(g, c));
    cr_assert_eq(ir_graph_num_nodes(g), 2);
    cr_assert_eq(ir_value_find(g, "c", 1), 0, "an erased result's name is released");
    cr_assert_eq(ir_node_next(g, b), 0);
    cr_assert_eq(ir_region_last(g, IR_ROOT_REGION), b);
    ir_node_erase(g, c); /* erasing twice is harmless */
    cr_assert_eq(ir_graph_num_nodes(g), 2);
    IrNodeId c2 = unary(g, IR_ROOT_REGION, IR_OP_NEG, x, "c", t);
    cr_assert_neq(c2, 0, "the name can be used again");

    /* replace uses of a with x (the table grew: counts needs num_values+1 entries) */
    ir_graph_replace_uses(g, av, x);
    free(counts);
    counts = calloc(ir_graph_num_values(g) + 1, sizeof *counts);
    ir_graph_count_uses(g, counts);
    cr_assert_eq(counts[av], 0);
    cr_assert_eq(ir_node_operand(g, b, 0), x);
    cr_assert_eq(ir_node_operand(g, b, 1), x);
    cr_assert_eq(ir_graph_output(g, 1), x, "region outputs are uses too");
    free(counts);

    /* move c2 to the front, then a to the end */
    ir_node_move(g, c2, IR_ROOT_REGION, a);
    cr_assert_eq(ir_region_first(g, IR_ROOT_REGION), c2);
    cr_assert_eq(ir_node_next(g, c2), a);
    ir_node_move(g, a, IR_ROOT_REGION, 0);
    cr_assert_eq(ir_region_last(g, IR_ROOT_REGION), a);
    IrNodeId seq[3] = {c2, b, a}, n = 0;
    for (int i = 0; i < 3; i++) cr_assert_eq(n = ir_graph_walk_next(g, n), seq[i]);
    cr_assert_eq(ir_graph_walk_next(g, n), 0);
    ir_node_erase(g, a);
    cr_assert_eq(ir_graph_num_nodes(g), 2);
    cr_assert_eq(ir_node_next(g, b), 0);
    verify_ok(g);
    ir_graph_destroy(g);
}

Test(graph, erase_node_with_regions) {
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 2, 2);
    IrValueId p = ir_region_add_arg(g, IR_ROOT_REGION, "p", ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL));
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    const char *nm[1] = {"r"};
    IrNodeId iff = ir_node_create(g, IR_ROOT_REGION, IR_OP_IF, 1, &p, 1, nm, &t);
    IrNodeId inner = unary(g, ir_node_region_at(g, iff, 0), IR_OP_RELU, x, "inner", t);
    unary(g, ir_node_region_at(g, iff, 1), IR_OP_NEG, x, "inner2", t);
    cr_assert_eq(ir_graph_num_nodes(g), 3);
    ir_node_erase(g, iff);
    cr_assert_eq(ir_graph_num_nodes(g), 0, "nested nodes die with their parent");
    cr_assert(!ir_node_alive(g, inner));
    cr_assert_eq(ir_value_find(g, "inner", 5), 0);
    cr_assert_eq(ir_value_find(g, "r", 1), 0);
    cr_assert_eq(ir_graph_walk_next(g, 0), 0);
    ir_graph_destroy(g);
}

Test(graph, built_graph_verifies_and_prints) {
    IrGraph *g = new_graph();
    ir_graph_set_name(g, "built");
    IrSymId B = ir_sym_declare(g, "B");
    IrConstraint rc = {.kind = IR_CONSTRAINT_RANGE, .a = ir_expr_sym(g, B), .lo = 1, .hi = 8};
    ir_graph_add_constraint(g, &rc);
    IrExprId xd[2] = {ir_expr_sym(g, B), ir_expr_const(g, 3)};
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", ir_type_tensor(g, IR_DTYPE_F32, 2, xd));
    float w[6] = {1, -2, 0.5f, 3, 0, 0.25f};
    IrConstId wc = ir_const_create(g, t2(g, IR_DTYPE_F32, 3, 2), w, sizeof w);
    IrValueId wv = ir_graph_add_const_value(g, "w", wc);
    IrExprId hd[2] = {ir_expr_sym(g, B), ir_expr_const(g, 2)};
    IrTypeId ht = ir_type_tensor(g, IR_DTYPE_F32, 2, hd);
    IrNodeId mm = binary(g, IR_ROOT_REGION, IR_OP_MAT_MUL, x, wv, "h", ht);
    ir_node_set_name(g, mm, "fc");
    IrLoc loc = {ir_str_intern_cstr(g, "model.py"), 3, 5};
    ir_node_set_loc(g, mm, loc);
    IrStrId prov[1] = {ir_str_intern_cstr(g, "/fc/MatMul")};
    ir_node_set_provenance(g, mm, 1, prov);
    IrNodeId sm = unary(g, IR_ROOT_REGION, IR_OP_SOFTMAX, ir_node_result(g, mm, 0), "y", ht);
    IrAttrValue ax = {.kind = IR_ATTR_INT, .i = -1};
    ir_node_set_attr(g, sm, "axis", &ax);
    IrValueId y = ir_node_result(g, sm, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    verify_ok(g);
    char *text = tu_print(g);
    cr_assert_not_null(text);
    const char *expect = "symbol B\n"
                         "constraint B in [1, 8]\n"
                         "\n"
                         "graph @built(%x: f32[B, 3]) {\n"
                         "  const %w: f32[3, 2] = [1.0, -2.0, 0.5, 3.0, 0.0, 0.25]\n"
                         "  %h = MatMul(%x, %w) : f32[B, 2] name(\"fc\") loc(\"model.py\":3:5) from(\"/fc/MatMul\")\n"
                         "  %y = Softmax(%h) {axis = -1} : f32[B, 2]\n"
                         "  return %y\n"
                         "}\n";
    cr_assert_str_eq(text, expect);
    /* and the printed text parses back to the same print */
    char *again = tu_canon(text, "built.ir");
    cr_assert_not_null(again);
    cr_assert_str_eq(again, text);
    free(again);
    free(text);
    ir_graph_destroy(g);
}

Test(graph, metadata_opsets_and_meta) {
    IrGraph *g = new_graph();
    ir_graph_set_opset(g, "", 17);
    ir_graph_set_opset(g, "com.microsoft", 1);
    ir_graph_set_opset(g, "", 18);
    cr_assert_eq(ir_graph_num_opsets(g), 2, "setting a domain again replaces it");
    const char *d;
    int64_t v;
    ir_graph_opset_at(g, 0, &d, &v);
    cr_assert_str_eq(d, "");
    cr_assert_eq(v, 18);
    ir_graph_set_meta(g, "producer", "pytorch");
    ir_graph_set_meta(g, "producer", "irtool");
    ir_graph_set_meta(g, "doc", "line1\nline2");
    cr_assert_eq(ir_graph_num_meta(g), 2);
    const char *k, *mv;
    ir_graph_meta_at(g, 0, &k, &mv);
    cr_assert_str_eq(k, "producer");
    cr_assert_str_eq(mv, "irtool");
    ir_graph_destroy(g);
}

Test(graph, many_nodes_stay_consistent) {
    /* growth of every table (nodes, values, pools, names) keeps ids valid */
    IrGraph *g = new_graph();
    IrTypeId t = t2(g, IR_DTYPE_F32, 4, 4);
    IrValueId cur = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    enum { N = 5000 };
    IrNodeId *nodes = malloc(N * sizeof *nodes);
    for (int i = 0; i < N; i++) {
        nodes[i] = unary(g, IR_ROOT_REGION, i % 2 ? IR_OP_RELU : IR_OP_NEG, cur, NULL, t);
        cr_assert_neq(nodes[i], 0);
        IrAttrValue v = {.kind = IR_ATTR_INT, .i = i};
        if (i % 7 == 0) ir_node_set_attr(g, nodes[i], "note", &v);
        cur = ir_node_result(g, nodes[i], 0);
    }
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &cur);
    cr_assert_eq(ir_graph_num_nodes(g), N);
    IrNodeId n = 0;
    for (int i = 0; i < N; i++) cr_assert_eq(n = ir_graph_walk_next(g, n), nodes[i]);
    cr_assert_eq(ir_node_attr_int(g, nodes[700], "note", NULL), 700);
    char nm[16];
    snprintf(nm, sizeof nm, "t%d", N);
    cr_assert_eq(ir_value_find(g, nm, strlen(nm)), cur);
    cr_assert_eq(ir_graph_status(g), IR_OK);
    /* verification reports the unknown attribute on every 7th node, capped at 20 */
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_verify(g, &d.diag), IR_EVERIFY);
    cr_assert_not_null(strstr(tu_diag_text(&d), "Neg has no attribute 'note'"), "%s", tu_diag_text(&d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "stopped after 20 errors"));
    tu_diag_free(&d);
    free(nodes);
    ir_graph_destroy(g);
}
