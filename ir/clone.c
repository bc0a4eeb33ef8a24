/* Cloning nodes and regions within one graph (used by lower-cf to inline branches and unroll
 * loops). A clone is a deep copy: op, attributes, name, location, result types and nested
 * regions. Operands go through a caller-owned value map (dense, indexed by IrValueId), which the
 * clone extends with old -> new for every value it defines, so a sequence of clones (a region's
 * nodes in order, or a loop body once per iteration) chains naturally.
 * Graph tables may move while nodes are created, so nothing here holds a pointer into them
 * across a builder call: names, attribute arrays and provenance lists are copied out first.
 */
#include "ir_internal.h"

#include <stdio.h>

/* A fresh value name derived from `orig`: "<stem>_u<k>" for the smallest free k, where the stem
 * is orig without a trailing "_u<digits>" (so clones of clones stay short). */
static IrStrId fresh_name(IrGraph *g, IrStrId orig_id) {
    const char *orig = ir_str(g, orig_id);
    size_t len = strlen(orig), stem = len;
    size_t d = len;
    while (d > 0 && orig[d - 1] >= '0' && orig[d - 1] <= '9') d--;
    if (d < len && d >= 3 && orig[d - 1] == 'u' && orig[d - 2] == '_') stem = d - 2;
    if (stem == 0) {
        orig = "v";
        stem = 1;
    }
    char small[128], *buf = stem + 16 <= sizeof small ? small : malloc(stem + 16);
    if (!buf) {
        ir__oom(g);
        return 0;
    }
    memcpy(buf, orig, stem); /* orig points into the string table: copy before interning */
    IrStrId s = 0;
    for (uint32_t k = 1; k; k++) {
        int n = snprintf(buf + stem, 16, "_u%u", k);
        size_t total = stem + (size_t)n;
        if (!ir_value_find(g, buf, total)) {
            s = ir_str_intern(g, buf, total);
            break;
        }
    }
    if (buf != small) free(buf);
    return s;
}

static IrValueId mapped(const IrValueId *map, IrValueId v) { return v && map[v] ? map[v] : v; }

/* Copies n's attributes onto c. Attribute arrays live in graph pools that may grow while the
 * copy is stored, so each array is copied out first. */
static void copy_attrs(IrGraph *g, IrNodeId n, IrNodeId c) {
    for (uint32_t i = 0; i < ir_node_num_attrs(g, n) && !g->status; i++) {
        IrAttrValue a = ir_node_attr_at(g, n, i);
        IrStrId name = ir_node_attr_name(g, n, i);
        void *tmp = NULL;
        size_t elem = a.kind == IR_ATTR_INTS     ? sizeof(int64_t)
                      : a.kind == IR_ATTR_FLOATS ? sizeof(double)
                      : a.kind == IR_ATTR_STRINGS ? sizeof(IrStrId)
                                                  : 0;
        if (elem && a.count) {
            const void *src = a.kind == IR_ATTR_INTS     ? (const void *)a.ints
                              : a.kind == IR_ATTR_FLOATS ? (const void *)a.floats
                                                         : (const void *)a.strs;
            tmp = malloc(elem * a.count);
            if (!tmp) {
                ir__oom(g);
                return;
            }
            memcpy(tmp, src, elem * a.count);
            if (a.kind == IR_ATTR_INTS) a.ints = tmp;
            else if (a.kind == IR_ATTR_FLOATS) a.floats = tmp;
            else a.strs = tmp;
        }
        ir_node_set_attr_id(g, c, name, &a);
        free(tmp);
    }
}

/* Provenance of the copy: the original's list, or its name. */
static void copy_provenance(IrGraph *g, IrNodeId n, IrNodeId c) {
    uint32_t np = ir_node_num_provenance(g, n);
    if (np) {
        IrStrId *ids = malloc(np * sizeof *ids);
        if (!ids) {
            ir__oom(g);
            return;
        }
        for (uint32_t i = 0; i < np; i++) ids[i] = ir_node_provenance(g, n, i);
        ir_node_set_provenance(g, c, np, ids);
        free(ids);
    } else if (ir__node(g, n)->name) {
        IrStrId s = ir__node(g, n)->name;
        ir_node_set_provenance(g, c, 1, &s);
    }
}

static IrStatus clone_region_nodes(IrGraph *g, IrRegionId src, IrRegionId dst, IrNodeId before, IrValueId *map,
                                   IrValueId *outputs);

/* Gives the regions of clone c the arguments and nodes of n's regions. */
static IrStatus clone_regions(IrGraph *g, IrNodeId n, IrNodeId c, IrValueId *map) {
    for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) {
        IrRegionId sr = ir_node_region_at(g, n, k), dr = ir_node_region_at(g, c, k);
        for (uint32_t i = 0; i < ir_region_num_args(g, sr); i++) {
            IrValueId a = ir_region_arg(g, sr, i);
            IrStrId name = fresh_name(g, ir_value_name_id(g, a));
            if (!name) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
            IrValueId na = ir_region_add_arg(g, dr, ir_str(g, name), ir_value_type(g, a));
            if (!na) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
            map[a] = na;
        }
        uint32_t no = ir_region_num_outputs(g, sr);
        IrValueId *outs = no ? malloc(no * sizeof *outs) : NULL;
        if (no && !outs) return IR_ENOMEM;
        IrStatus st = clone_region_nodes(g, sr, dr, 0, map, outs);
        if (st == IR_OK) ir_region_set_outputs(g, dr, no, outs);
        free(outs);
        if (st) return st;
    }
    return ir_graph_status(g);
}

IrNodeId ir_node_clone(IrGraph *g, IrNodeId n, IrRegionId dst, IrNodeId before, IrValueId *map) {
    if (g->status || !ir_node_alive(g, n) || !dst || dst > ir_graph_num_regions(g)) return 0;
    if (before && (!ir_node_alive(g, before) || ir_node_region(g, before) != dst)) return 0;
    uint32_t no = ir_node_num_operands(g, n), nr = ir_node_num_results(g, n);
    IrValueId small_ops[8];
    IrStrId small_names[8];
    IrTypeId small_types[8];
    IrValueId *ops = no <= 8 ? small_ops : malloc(no * sizeof *ops);
    IrStrId *names = nr <= 8 ? small_names : malloc(nr * sizeof *names);
    IrTypeId *types = nr <= 8 ? small_types : malloc(nr * sizeof *types);
    IrNodeId c = 0;
    if (!ops || !names || !types) {
        ir__oom(g);
        goto out;
    }
    for (uint32_t i = 0; i < no; i++) ops[i] = mapped(map, ir_node_operand(g, n, i));
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId r = ir_node_result(g, n, i);
        types[i] = ir_value_type(g, r);
        names[i] = r ? fresh_name(g, ir_value_name_id(g, r)) : IR_ABSENT_NAME;
        if (!names[i]) goto out;
    }
    c = ir__node_create(g, dst, before, ir_node_op(g, n), no, ops, nr, names, types);
    if (!c) goto out;
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId r = ir_node_result(g, n, i);
        if (r) map[r] = ir_node_result(g, c, i);
    }
    ir__node(g, c)->name = ir__node(g, n)->name;
    ir_node_set_loc(g, c, ir_node_loc(g, n));
    uint32_t line, col;
    ir_node_text_pos(g, n, &line, &col);
    ir_node_set_text_pos(g, c, line, col);
    copy_provenance(g, n, c);
    copy_attrs(g, n, c);
    if (clone_regions(g, n, c, map) != IR_OK && !g->status) ir__oom(g);
    if (g->status) c = 0;
out:
    if (ops != small_ops) free(ops);
    if (names != small_names) free(names);
    if (types != small_types) free(types);
    return c;
}

/* The node list is snapshotted first: when src == dst the copies land inside the list being
 * copied and must not be copied again. */
static IrStatus clone_region_nodes(IrGraph *g, IrRegionId src, IrRegionId dst, IrNodeId before, IrValueId *map,
                                   IrValueId *outputs) {
    uint32_t count = 0;
    for (IrNodeId m = ir_region_first(g, src); m; m = ir_node_next(g, m)) count++;
    IrNodeId *list = count ? malloc(count * sizeof *list) : NULL;
    if (count && !list) return IR_ENOMEM;
    count = 0;
    for (IrNodeId m = ir_region_first(g, src); m; m = ir_node_next(g, m)) list[count++] = m;
    IrStatus st = IR_OK;
    for (uint32_t i = 0; i < count && st == IR_OK; i++)
        if (!ir_node_clone(g, list[i], dst, before, map)) st = g->status ? g->status : IR_EINVAL;
    free(list);
    if (st) return st;
    if (outputs)
        for (uint32_t i = 0; i < ir_region_num_outputs(g, src); i++)
            outputs[i] = mapped(map, ir_region_output(g, src, i));
    return IR_OK;
}

IrStatus ir_region_clone_into(IrGraph *g, IrRegionId src, IrRegionId dst, IrNodeId before, IrValueId *map,
                              IrValueId *outputs) {
    if (g->status) return g->status;
    uint32_t nreg = ir_graph_num_regions(g);
    if (!src || src > nreg || !dst || dst > nreg || (src == dst && !before)) return IR_EINVAL;
    if (before && (!ir_node_alive(g, before) || ir_node_region(g, before) != dst)) return IR_EINVAL;
    return clone_region_nodes(g, src, dst, before, map, outputs);
}
