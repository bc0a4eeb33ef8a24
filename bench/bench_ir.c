/* bench_ir: times the IR core on text graphs (from gen_graph) and on weight-heavy binaries.
 *
 * For each text graph: parse, verify, parse+verify, print, binary write and binary load
 * (ir_read_binary, mmap), each the best of --reps runs in this process (wall clock); peak
 * memory of parse+verify is measured in a fresh child process (this program re-executed with
 * --child-mem), from /proc/self/status: VmHWM after the work minus VmRSS before it. Then
 * ir_read_binary on graphs holding one constant of 1 MiB, 64 MiB and 1 GiB, to show that load
 * time does not depend on weight size. Prints a markdown table; --json writes the same figures.
 */
#include "ir.h"
#include "ir/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GRAPHS 16
#define MAX_WEIGHTS 8

typedef struct GraphResult {
    const char *path;
    uint32_t nodes;
    size_t text_bytes, printed_bytes, irb_bytes;
    bool roundtrip_identical; /* printing the parsed graph gives the input bytes back */
    double parse_s, verify_s, parse_verify_s, print_s, write_s, load_s, load_verify_s;
    bool mem_ok;
    long rss_before_kib, hwm_kib;  /* child process, around parse+verify */
    size_t table_bytes;            /* ir_graph_memory_bytes after parse+verify */
} GraphResult;

typedef struct WeightResult {
    uint64_t weight_bytes, file_bytes;
    double load_s;
} WeightResult;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, IrStatus st) {
    fprintf(stderr, "bench_ir: %s failed: %s\n", what, ir_status_name(st));
    exit(1);
}

static double min_d(double a, double b) { return a < b ? a : b; }

/* /proc/self/status field in KiB, or -1. */
static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* ---- peak memory (child) ------------------------------------------------------------------ */

/* Runs in a fresh process: read the file, note RSS, parse+verify, note the high-water mark. */
static int child_mem(const char *path) {
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    char *text;
    size_t len;
    if (ir_read_file(path, &diag, &text, &len)) return 1;
    long before = status_kib("VmRSS");
    IrGraph *g;
    IrStatus st = ir_parse_text(text, len, path, &diag, &g);
    if (st == IR_OK) st = ir_verify(g, &diag);
    if (st != IR_OK) return 1;
    long hwm = status_kib("VmHWM");
    printf("%ld %ld %zu\n", before, hwm, ir_graph_memory_bytes(g));
    return 0;
}

static bool measure_mem(const char *self, GraphResult *r) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(self, self, "--child-mem", r->path, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *p = fdopen(fds[0], "r");
    bool ok = p && fscanf(p, "%ld %ld %zu", &r->rss_before_kib, &r->hwm_kib, &r->table_bytes) == 3;
    if (p) fclose(p);
    int status;
    ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
    return ok;
}

/* ---- text graphs ---------------------------------------------------------------------------- */

static void bench_graph(const char *self, const char *tmpdir, int reps, GraphResult *r) {
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    char *text;
    size_t len;
    IrStatus st = ir_read_file(r->path, &diag, &text, &len);
    if (st) die("reading the graph", st);
    r->text_bytes = len;
    r->parse_s = r->verify_s = r->parse_verify_s = r->print_s = r->write_s = r->load_s = r->load_verify_s = 1e30;
    char irb[4096];
    snprintf(irb, sizeof irb, "%s/bench_%d.irb", tmpdir, (int)getpid());
    for (int rep = 0; rep < reps; rep++) {
        IrGraph *g;
        double t0 = now();
        st = ir_parse_text(text, len, r->path, &diag, &g);
        double t1 = now();
        if (st) die("ir_parse_text", st);
        st = ir_verify(g, &diag);
        double t2 = now();
        if (st) die("ir_verify", st);
        r->parse_s = min_d(r->parse_s, t1 - t0);
        r->parse_verify_s = min_d(r->parse_verify_s, t2 - t0);
        r->verify_s = min_d(r->verify_s, t2 - t1);
        r->nodes = ir_graph_num_nodes(g);
        IrStrBuf b;
        ir_strbuf_init(&b);
        t0 = now();
        st = ir_print_text(g, &b);
        r->print_s = min_d(r->print_s, now() - t0);
        if (st) die("ir_print_text", st);
        r->printed_bytes = b.len;
        r->roundtrip_identical = b.len == len && memcmp(b.data, text, len) == 0;
        ir_strbuf_free(&b);
        t0 = now();
        st = ir_write_binary(g, irb, &diag);
        r->write_s = min_d(r->write_s, now() - t0);
        if (st) die("ir_write_binary", st);
        ir_graph_destroy(g);
        IrGraph *bg;
        t0 = now();
        st = ir_read_binary(irb, &diag, &bg);
        t1 = now();
        if (st) die("ir_read_binary", st);
        st = ir_verify(bg, &diag);
        t2 = now();
        if (st) die("ir_verify (binary)", st);
        r->load_s = min_d(r->load_s, t1 - t0);
        r->load_verify_s = min_d(r->load_verify_s, t2 - t0);
        ir_graph_destroy(bg);
    }
    FILE *f = fopen(irb, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        r->irb_bytes = (size_t)ftell(f);
        fclose(f);
    }
    unlink(irb);
    free(text);
    r->mem_ok = measure_mem(self, r);
}

/* ---- weight-size independence ------------------------------------------------------------- */

/* graph(x: f32[n]) { const w: f32[n] = ...; y = Add(x, w); return y } written as .irb */
static void write_weight_graph(const char *path, uint64_t nbytes) {
    IrGraph *g;
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    if (ir_graph_create(&g)) die("ir_graph_create", IR_ENOMEM);
    ir_graph_set_name(g, "weights");
    int64_t n = (int64_t)(nbytes / 4);
    IrTypeId t = ir_type_tensor_i64(g, IR_DTYPE_F32, 1, &n);
    IrConstId c = ir_const_create(g, t, NULL, nbytes);
    if (!c) die("ir_const_create", ir_graph_status(g));
    uint32_t *w = (uint32_t *)ir_const_data(g, c);
    for (int64_t i = 0; i < n; i++) w[i] = (uint32_t)i * 2654435761u; /* touch every page */
    IrValueId wv = ir_graph_add_const_value(g, "w", c);
    IrValueId x = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    const char *names[1] = {"y"};
    IrNodeId node = ir_node_create(g, IR_ROOT_REGION, IR_OP_ADD, 2, (IrValueId[]){x, wv}, 1, names, &t);
    if (!node) die("ir_node_create", ir_graph_status(g));
    IrValueId y = ir_node_result(g, node, 0);
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &y);
    IrStatus st = ir_verify(g, &diag);
    if (!st) st = ir_write_binary(g, path, &diag);
    if (st) die("writing the weight graph", st);
    ir_graph_destroy(g);
}

static void bench_weights(const char *tmpdir, int reps, uint64_t nbytes, WeightResult *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_w%llu_%d.irb", tmpdir, (unsigned long long)nbytes, (int)getpid());
    write_weight_graph(path, nbytes);
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    r->weight_bytes = nbytes;
    r->load_s = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        IrGraph *g;
        double t0 = now();
        IrStatus st = ir_read_binary(path, &diag, &g);
        double t1 = now();
        if (st) die("ir_read_binary (weights)", st);
        r->load_s = min_d(r->load_s, t1 - t0);
        IrValueId w = ir_value_find(g, "w", 1);
        if (!w || ir_const_nbytes(g, ir_value_const(g, w)) != nbytes) die("weight graph check", IR_EVERIFY);
        ir_graph_destroy(g);
    }
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        r->file_bytes = (uint64_t)ftell(f);
        fclose(f);
    }
    unlink(path);
}

/* ---- reporting ------------------------------------------------------------------------------ */

static double per_node_bytes(const GraphResult *r) {
    return (double)(r->hwm_kib - r->rss_before_kib) * 1024.0 / (double)r->nodes;
}

static void print_table(const GraphResult *gr, int ng, const WeightResult *wr, int nw, int reps) {
    printf("\n### Text and binary IR (best of %d, wall clock)\n\n", reps);
    printf("| nodes | text MB | parse ms | parse MB/s | parse Mnodes/s | verify ms | parse+verify ms "
           "| print ms | print MB/s | .irb MB | write .irb ms | load .irb ms | parse / load "
           "| load+verify ms | peak B/node | tables B/node |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < ng; i++) {
        const GraphResult *r = &gr[i];
        double mb = (double)r->text_bytes / 1e6;
        printf("| %u | %.1f | %.1f | %.0f | %.2f | %.1f | %.1f | %.1f | %.0f | %.1f | %.1f | %.2f | %.1fx | %.1f ",
               r->nodes, mb, r->parse_s * 1e3, mb / r->parse_s, r->nodes / r->parse_s / 1e6,
               r->verify_s * 1e3, r->parse_verify_s * 1e3, r->print_s * 1e3,
               (double)r->printed_bytes / 1e6 / r->print_s, (double)r->irb_bytes / 1e6, r->write_s * 1e3,
               r->load_s * 1e3, r->parse_s / r->load_s, r->load_verify_s * 1e3);
        if (r->mem_ok)
            printf("| %.0f | %.0f |\n", per_node_bytes(r), (double)r->table_bytes / r->nodes);
        else
            printf("| n/a | n/a |\n");
    }
    for (int i = 0; i < ng; i++)
        if (!gr[i].roundtrip_identical)
            printf("\nnote: printing %s did not give its bytes back\n", gr[i].path);
    if (!nw) return;
    printf("\n### Binary load vs weight size (one constant, best of %d)\n\n", reps);
    printf("| weights | .irb bytes | ir_read_binary ms |\n|---:|---:|---:|\n");
    for (int i = 0; i < nw; i++)
        printf("| %llu MiB | %llu | %.3f |\n", (unsigned long long)(wr[i].weight_bytes >> 20),
               (unsigned long long)wr[i].file_bytes, wr[i].load_s * 1e3);
}

/* v rounded to `places` decimals (a timing's meaningful digits), printed in its shortest form */
static json_t *fixed(double v, int places) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", places, v);
    return ir_json_real(strtod(buf, NULL));
}

static void write_json(const char *path, const GraphResult *gr, int ng, const WeightResult *wr, int nw, int reps) {
    json_t *doc = json_object(), *graphs = json_array(), *weights = json_array();
    bool ok = ir_json_set(doc, "reps", json_integer(reps));
    for (int i = 0; i < ng; i++) {
        const GraphResult *r = &gr[i];
        double mb = (double)r->text_bytes / 1e6;
        json_t *o = json_object();
        ok &= ir_json_set(o, "file", ir_json_string(r->path));
        ok &= ir_json_set(o, "nodes", json_integer(r->nodes));
        ok &= ir_json_set(o, "text_bytes", json_integer((json_int_t)r->text_bytes));
        ok &= ir_json_set(o, "roundtrip_identical", json_boolean(r->roundtrip_identical));
        ok &= ir_json_set(o, "parse_ms", fixed(r->parse_s * 1e3, 3));
        ok &= ir_json_set(o, "parse_mb_s", fixed(mb / r->parse_s, 1));
        ok &= ir_json_set(o, "parse_nodes_s", fixed(r->nodes / r->parse_s, 0));
        ok &= ir_json_set(o, "verify_ms", fixed(r->verify_s * 1e3, 3));
        ok &= ir_json_set(o, "parse_verify_ms", fixed(r->parse_verify_s * 1e3, 3));
        ok &= ir_json_set(o, "print_ms", fixed(r->print_s * 1e3, 3));
        ok &= ir_json_set(o, "print_mb_s", fixed((double)r->printed_bytes / 1e6 / r->print_s, 1));
        ok &= ir_json_set(o, "irb_bytes", json_integer((json_int_t)r->irb_bytes));
        ok &= ir_json_set(o, "write_irb_ms", fixed(r->write_s * 1e3, 3));
        ok &= ir_json_set(o, "load_irb_ms", fixed(r->load_s * 1e3, 3));
        ok &= ir_json_set(o, "load_verify_irb_ms", fixed(r->load_verify_s * 1e3, 3));
        ok &= ir_json_set(o, "parse_over_load", fixed(r->parse_s / r->load_s, 2));
        if (r->mem_ok) {
            ok &= ir_json_set(o, "rss_before_parse_kib", json_integer(r->rss_before_kib));
            ok &= ir_json_set(o, "peak_rss_kib", json_integer(r->hwm_kib));
            ok &= ir_json_set(o, "peak_bytes_per_node", fixed(per_node_bytes(r), 1));
            ok &= ir_json_set(o, "table_bytes", json_integer((json_int_t)r->table_bytes));
            ok &= ir_json_set(o, "table_bytes_per_node", fixed((double)r->table_bytes / r->nodes, 1));
        } else {
            ok &= ir_json_set(o, "peak_bytes_per_node", json_null());
        }
        ok &= ir_json_push(graphs, o);
    }
    ok &= ir_json_set(doc, "graphs", graphs);
    for (int i = 0; i < nw; i++) {
        json_t *o = json_object();
        ok &= ir_json_set(o, "weight_bytes", json_integer((json_int_t)wr[i].weight_bytes));
        ok &= ir_json_set(o, "irb_bytes", json_integer((json_int_t)wr[i].file_bytes));
        ok &= ir_json_set(o, "load_irb_ms", fixed(wr[i].load_s * 1e3, 4));
        ok &= ir_json_push(weights, o);
    }
    ok &= ir_json_set(doc, "weights", weights);
    IrDiag d;
    ir_diag_init(&d, ir_diag_print_fn, stderr);
    if (!ok || ir_json_write_file(doc, IR_JSON_ROWS, path, &d)) {
        fprintf(stderr, "bench_ir: cannot write %s\n", path);
        exit(1);
    }
    json_decref(doc);
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_ir [--json OUT] [--reps N] [--tmp DIR] [--weights MIB,...] GRAPH.ir...\n"
            "  --weights  constant sizes for the load-vs-weight-size check (default 1,64,1024; 0 = skip)\n"
            "  --tmp      where .irb files are written and deleted (default /tmp)\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child-mem") == 0) return child_mem(argv[2]);
    const char *json = NULL, *tmpdir = "/tmp", *weights = "1,64,1024";
    int reps = 3;
    GraphResult gr[MAX_GRAPHS] = {0};
    int ng = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) json = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--tmp") == 0 && i + 1 < argc) tmpdir = argv[++i];
        else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc) weights = argv[++i];
        else if (argv[i][0] == '-') usage();
        else if (ng < MAX_GRAPHS) gr[ng++].path = argv[i];
        else usage();
    }
    if (reps < 1 || (ng == 0 && strcmp(weights, "0") == 0)) usage();
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) die("readlink /proc/self/exe", IR_EIO);
    self[sl] = 0;
    for (int i = 0; i < ng; i++) {
        fprintf(stderr, "bench_ir: %s\n", gr[i].path);
        bench_graph(self, tmpdir, reps, &gr[i]);
    }
    WeightResult wr[MAX_WEIGHTS];
    int nw = 0;
    if (strcmp(weights, "0") != 0) {
        for (const char *p = weights; *p && nw < MAX_WEIGHTS;) {
            char *end;
            unsigned long mib = strtoul(p, &end, 10);
            if (end == p || mib == 0) usage();
            fprintf(stderr, "bench_ir: weights %lu MiB\n", mib);
            bench_weights(tmpdir, reps, (uint64_t)mib << 20, &wr[nw++]);
            p = *end == ',' ? end + 1 : end;
        }
    }
    print_table(gr, ng, wr, nw, reps);
    if (json) write_json(json, gr, ng, wr, nw, reps);
    return 0;
}
