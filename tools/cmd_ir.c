/* The IR commands: fmt, convert, verify, info. */
#include "cli.h"
#include "ir/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CLI_COMMAND(cmd_fmt) {
    const char *file = NULL;
    bool in_place = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "--in-place") == 0)
            in_place = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("fmt", "unknown option '%s'", argv[i]);
        else if (file)
            return cli_usage_error("fmt", "only one FILE is accepted");
        else
            file = argv[i];
    }
    if (!file) return cli_usage_error("fmt", "missing FILE");
    if (in_place && (strcmp(file, "-") == 0 || ir_format_from_path(file) != IR_FORMAT_TEXT))
        return cli_usage_error("fmt", "-i needs a .ir file");
    IrGraph *g;
    IrStatus s = cli_load(file, false, &g);
    if (s) return cli_exit_for(s);
    IrDiag d;
    cli_diag_init(&d);
    s = ir_save(g, in_place ? file : "-", &d);
    ir_graph_destroy(g);
    return cli_exit_for(s);
}

CLI_COMMAND(cmd_convert) {
    const char *in = NULL, *out = NULL;
    bool verify = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (++i >= argc) return cli_usage_error("convert", "-o needs a file");
            out = argv[i];
        } else if (strcmp(argv[i], "--no-verify") == 0) {
            verify = false;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("convert", "unknown option '%s'", argv[i]);
        } else if (in) {
            return cli_usage_error("convert", "only one input is accepted");
        } else {
            in = argv[i];
        }
    }
    if (!in) return cli_usage_error("convert", "missing input file");
    if (!out) return cli_usage_error("convert", "missing -o OUT");
    if (cli_refuse_clobber("convert", out, argc, argv)) return EXIT_INVALID;
    if (strcmp(out, "-") != 0 && ir_format_from_path(out) != IR_FORMAT_TEXT &&
        ir_format_from_path(out) != IR_FORMAT_BINARY && ir_format_from_path(out) != IR_FORMAT_ONNX)
        return cli_usage_error("convert", "output '%s' must end in .ir, .irb or .onnx", out);
    IrGraph *g;
    IrStatus s = cli_load(in, verify, &g);
    if (s) return cli_exit_for(s);
    IrDiag d;
    cli_diag_init(&d);
    s = ir_save(g, out, &d);
    ir_graph_destroy(g);
    return cli_exit_for(s);
}

CLI_COMMAND(cmd_verify) {
    const char *file = NULL;
    uint32_t max_errors = 20;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--max-errors") == 0) {
            if (++i >= argc) return cli_usage_error("verify", "--max-errors needs a number");
            char *e;
            long v = strtol(argv[i], &e, 10);
            if (*e || v <= 0 || v > 100000) return cli_usage_error("verify", "bad --max-errors '%s'", argv[i]);
            max_errors = (uint32_t)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("verify", "unknown option '%s'", argv[i]);
        } else if (file) {
            return cli_usage_error("verify", "only one FILE is accepted");
        } else {
            file = argv[i];
        }
    }
    if (!file) return cli_usage_error("verify", "missing FILE");
    IrDiag d;
    cli_diag_init(&d);
    IrGraph *g;
    IrStatus s = ir_load(file, &d, &g);
    if (s) return cli_exit_for(s);
    IrVerifyOptions o = {max_errors, true};
    s = ir_verify_ex(g, &o, &d);
    if (s == IR_OK) printf("%s: ok (%u nodes)\n", file, ir_graph_num_nodes(g));
    else fprintf(stderr, "%s: %u error%s\n", file, d.n_errors, d.n_errors == 1 ? "" : "s");
    ir_graph_destroy(g);
    return cli_exit_for(s);
}

/* ---- info ---------------------------------------------------------------------------------- */

static char *type_text(const IrGraph *g, IrTypeId t) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t, &b);
    return b.data ? b.data : strdup("?");
}

static char *constraint_text(const IrGraph *g, IrConstraint c) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_constraint_print(g, &c, &b);
    return b.data ? b.data : strdup("?");
}

static const char *origin_name(IrConstraintOrigin o) {
    return o == IR_CONSTRAINT_FACT ? "fact" : o == IR_CONSTRAINT_GUARD ? "guard" : "constraint";
}

typedef struct Stats {
    uint32_t op_count[IR_OP_COUNT];
    uint32_t nodes, regions, fused;
    uint64_t params, weight_bytes;
} Stats;

static void collect(const IrGraph *g, Stats *st) {
    memset(st, 0, sizeof *st);
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        st->op_count[op]++;
        st->nodes++;
        st->regions += ir_node_num_regions(g, n);
        if (op == IR_OP_FUSED) st->fused++;
    }
    for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++) {
        IrConstId c = ir_value_const(g, ir_graph_const_value(g, i));
        int64_t numel = 0;
        ir_type_numel(g, ir_const_type(g, c), &numel);
        st->params += (uint64_t)numel;
        st->weight_bytes += ir_const_nbytes(g, c);
    }
}

static json_t *values_json(const IrGraph *g, bool inputs) {
    uint32_t n = inputs ? ir_graph_num_inputs(g) : ir_graph_num_outputs(g);
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        IrValueId v = inputs ? ir_graph_input(g, i) : ir_graph_output(g, i);
        char *t = type_text(g, ir_value_type(g, v));
        json_t *o = json_object();
        bool ok = ir_json_set(o, "name", ir_json_string(ir_value_name(g, v)));
        ok &= ir_json_set(o, "type", ir_json_string(t));
        free(t);
        if (!ok || !ir_json_push(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* One line, keys in this order (tests and scripts read it). */
static int info_json(const IrGraph *g, const Stats *st) {
    json_t *o = json_object(), *ops = json_object(), *syms = json_array();
    bool ok = ir_json_set(o, "graph", ir_json_string(*ir_graph_name(g) ? ir_graph_name(g) : "main"));
    ok &= ir_json_set(o, "nodes", json_integer(st->nodes));
    for (int op = 1; op < IR_OP_COUNT; op++)
        if (st->op_count[op]) ok &= ir_json_set(ops, ir_op_name((IrOp)op), json_integer(st->op_count[op]));
    ok &= ir_json_set(o, "ops", ops);
    ok &= ir_json_set(o, "parameters", json_integer((json_int_t)st->params));
    ok &= ir_json_set(o, "weight_bytes", json_integer((json_int_t)st->weight_bytes));
    ok &= ir_json_set(o, "fused_groups", json_integer(st->fused));
    ok &= ir_json_set(o, "regions", json_integer(st->regions));
    for (uint32_t s = 1; s <= ir_graph_num_syms(g); s++)
        if (!ir_sym_specialized(g, s)) ok &= ir_json_push(syms, ir_json_string(ir_sym_name(g, s)));
    ok &= ir_json_set(o, "symbols", syms);
    static const IrConstraintOrigin origins[] = {IR_CONSTRAINT_USER, IR_CONSTRAINT_FACT, IR_CONSTRAINT_GUARD};
    static const char *keys[] = {"constraints", "facts", "guards"};
    for (int k = 0; k < 3; k++) {
        json_t *list = json_array();
        for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            if (c.origin != origins[k]) continue;
            char *t = constraint_text(g, c);
            ok &= ir_json_push(list, ir_json_string(t));
            free(t);
        }
        ok &= ir_json_set(o, keys[k], list);
    }
    ok &= ir_json_set(o, "inputs", values_json(g, true));
    ok &= ir_json_set(o, "outputs", values_json(g, false));
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (ok) ir_json_write(o, IR_JSON_LINE, &b);
    json_decref(o);
    ok = ok && !b.failed && b.data;
    if (ok) fputs(b.data, stdout);
    else fprintf(stderr, "irtool info: out of memory\n");
    ir_strbuf_free(&b);
    return ok ? EXIT_OK : cli_exit_for(IR_ENOMEM);
}

static void human_bytes(char *buf, size_t cap, uint64_t b) {
    if (b < 1024) snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else if (b < 1024 * 1024) snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    else if (b < 1024ull * 1024 * 1024) snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

static void info_text(const IrGraph *g, const char *file, const Stats *st) {
    char wb[32];
    human_bytes(wb, sizeof wb, st->weight_bytes);
    printf("%s: graph @%s\n", file, *ir_graph_name(g) ? ir_graph_name(g) : "main");
    printf("  nodes         %u\n", st->nodes);
    printf("  parameters    %llu\n", (unsigned long long)st->params);
    printf("  weight bytes  %llu (%s)\n", (unsigned long long)st->weight_bytes, wb);
    printf("  regions       %u\n", st->regions);
    printf("  fused groups  %u\n", st->fused);
    printf("  inputs       ");
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        char *t = type_text(g, ir_value_type(g, ir_graph_input(g, i)));
        printf(" %%%s: %s", ir_value_name(g, ir_graph_input(g, i)), t);
        free(t);
    }
    printf("\n  outputs      ");
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) {
        char *t = type_text(g, ir_value_type(g, ir_graph_output(g, i)));
        printf(" %%%s: %s", ir_value_name(g, ir_graph_output(g, i)), t);
        free(t);
    }
    printf("\n");
    bool any_sym = false;
    for (uint32_t s = 1; s <= ir_graph_num_syms(g); s++) {
        if (ir_sym_specialized(g, s)) continue;
        printf(any_sym ? " %s" : "  symbols       %s", ir_sym_name(g, s));
        any_sym = true;
    }
    if (any_sym) printf("\n");
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        char *t = constraint_text(g, c);
        printf("  %-13s %s", origin_name(c.origin), t);
        if (c.note) printf("   (from %s)", ir_str(g, c.note));
        printf("\n");
        free(t);
    }
    printf("  ops:\n");
    /* most frequent first, ties by name, so the listing is stable */
    uint32_t order[IR_OP_COUNT], n = 0;
    for (int op = 1; op < IR_OP_COUNT; op++)
        if (st->op_count[op]) order[n++] = (uint32_t)op;
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0; j--) {
            uint32_t a = order[j - 1], b = order[j];
            if (st->op_count[a] > st->op_count[b] ||
                (st->op_count[a] == st->op_count[b] && strcmp(ir_op_name((IrOp)a), ir_op_name((IrOp)b)) <= 0))
                break;
            order[j - 1] = b;
            order[j] = a;
        }
    for (uint32_t i = 0; i < n; i++) printf("    %-24s %u\n", ir_op_name((IrOp)order[i]), st->op_count[order[i]]);
}

CLI_COMMAND(cmd_info) {
    const char *file = NULL;
    bool json = false, verify = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--no-verify") == 0) verify = false;
        else if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("info", "unknown option '%s'", argv[i]);
        else if (file) return cli_usage_error("info", "only one FILE is accepted");
        else file = argv[i];
    }
    if (!file) return cli_usage_error("info", "missing FILE");
    IrGraph *g;
    IrStatus s = cli_load(file, verify, &g);
    if (s) return cli_exit_for(s);
    Stats st;
    collect(g, &st);
    int rc = EXIT_OK;
    if (json) rc = info_json(g, &st);
    else info_text(g, file, &st);
    ir_graph_destroy(g);
    return rc;
}
