/* JSON through jansson (ir/json.c, issue 31): the writer's layouts and shortest round-trip reals,
 * strings that are not UTF-8, located syntax and shape errors; and the baseline reader of
 * `irtool validate --corpus` run on the real binary with valid JSON laid out differently (the
 * corpus baseline re-indented, keys in another order) and with each kind of wrong shape. */
#include "ir/json.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *write_text(const json_t *v, IrJsonLayout layout) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_json_write(v, layout, &b);
    cr_assert(!b.failed && b.data);
    return b.data;
}

static json_t *parse_ok(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    cr_assert(v, "'%s' does not parse: %s", text, e.text);
    return v;
}

Test(json, layouts) {
    json_t *o = json_object(), *rows = json_array(), *r = json_object(), *empty = json_array();
    cr_assert(ir_json_set(r, "name", ir_json_string("y")) && ir_json_set(r, "dims", json_pack("[ii]", 2, 3)));
    cr_assert(ir_json_push(rows, r) && ir_json_push(rows, json_pack("{s:b}", "ok", 1)));
    cr_assert(ir_json_set(o, "model", json_string("m")) && ir_json_set(o, "rows", rows) &&
              ir_json_set(o, "none", empty) && ir_json_set(o, "first", json_pack("{s:n}", "node")));
    char *line = write_text(o, IR_JSON_LINE), *text = write_text(o, IR_JSON_ROWS);
    cr_assert_str_eq(line, "{\"model\": \"m\", \"rows\": [{\"name\": \"y\", \"dims\": [2, 3]}, {\"ok\": true}], \"none\": [], "
                           "\"first\": {\"node\": null}}\n");
    cr_assert_str_eq(text, "{\n  \"model\": \"m\",\n  \"rows\": [\n    {\"name\": \"y\", \"dims\": [2, 3]},\n    {\"ok\": true}\n"
                           "  ],\n  \"none\": [],\n  \"first\": {\"node\": null}\n}\n");
    /* without reals, the one-line layout is jansson's own text */
    char *jd = json_dumps(o, JSON_ENCODE_ANY);
    cr_assert(jd);
    size_t n = strlen(line);
    cr_assert(n == strlen(jd) + 1 && strncmp(line, jd, n - 1) == 0, "%s\nvs\n%s", line, jd);
    free(jd), free(line), free(text);
    json_decref(o);
}

/* Reals print as Python writes them, the shortest text that reads back to the same double */
Test(json, reals_shortest_round_trip) {
    static const struct {
        double v;
        const char *text;
    } cases[] = {{0.1, "0.1"},      {1.0, "1.0"},       {1e-05, "1e-05"},       {1e16, "1e+16"},
                 {-0.0, "-0.0"},    {123456.75, "123456.75"}, {0.30000000000000004, "0.30000000000000004"},
                 {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {0.999974067, "0.999974067"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = ir_json_real(cases[i].v);
        char *t = write_text(v, IR_JSON_LINE);
        t[strlen(t) - 1] = 0;
        cr_assert_str_eq(t, cases[i].text);
        free(t);
        json_decref(v);
    }
    /* every finite double comes back bit for bit through jansson's parser */
    TuRng rng;
    tu_rng_seed(&rng, 31);
    json_t *a = json_array();
    double vals[2000];
    for (int i = 0; i < 2000; i++) {
        uint64_t bits = tu_rng_next(&rng);
        memcpy(&vals[i], &bits, 8);
        if (!isfinite(vals[i])) vals[i] = (double)(int64_t)bits / 3.0;
        cr_assert(ir_json_push(a, ir_json_real(vals[i])));
    }
    char *t = write_text(a, IR_JSON_LINE);
    json_t *back = parse_ok(t);
    for (int i = 0; i < 2000; i++) {
        double d = json_real_value(json_array_get(back, (size_t)i));
        cr_assert(memcmp(&d, &vals[i], 8) == 0, "%.17g came back as %.17g", vals[i], d);
    }
    free(t);
    json_decref(a), json_decref(back);
    /* no NaN or infinity in JSON: null */
    json_t *nn = ir_json_real(NAN), *inf = ir_json_real(-INFINITY);
    cr_assert(json_is_null(nn) && json_is_null(inf));
}

Test(json, integers_and_strings_exact) {
    json_t *o = json_object();
    cr_assert(ir_json_set(o, "lo", json_integer(INT64_MIN)) && ir_json_set(o, "hi", json_integer(INT64_MAX)));
    cr_assert(ir_json_set(o, "esc", ir_json_string("a\"b\\c\n\t\x01 \xc3\xa9")));
    cr_assert(ir_json_set(o, "bad", ir_json_string("x\xff" "y\xc3")));
    cr_assert(ir_json_set(o, "null", ir_json_string(NULL)));
    cr_assert(ir_json_set(o, "k\"ey", json_true()));
    char *t = write_text(o, IR_JSON_ROWS);
    json_t *back = parse_ok(t);
    cr_assert_eq(json_integer_value(json_object_get(back, "lo")), INT64_MIN);
    cr_assert_eq(json_integer_value(json_object_get(back, "hi")), INT64_MAX);
    cr_assert_str_eq(json_string_value(json_object_get(back, "esc")), "a\"b\\c\n\t\x01 \xc3\xa9");
    cr_assert_str_eq(json_string_value(json_object_get(back, "bad")), "x\xef\xbf\xbdy\xef\xbf\xbd");
    cr_assert_str_eq(json_string_value(json_object_get(back, "null")), "");
    cr_assert(json_is_true(json_object_get(back, "k\"ey")));
    /* keys keep their insertion order */
    const char *keys[] = {"lo", "hi", "esc", "bad", "null", "k\"ey"};
    size_t i = 0;
    const char *k;
    json_t *m;
    json_object_foreach(back, k, m) cr_assert_str_eq(k, keys[i++]);
    free(t);
    json_decref(o), json_decref(back);
    /* a failed insert is reported, not lost */
    cr_assert_not(ir_json_set(NULL, "k", json_true()));
    cr_assert_not(ir_json_push(json_object(), NULL));
}

static char *parse_error(const char *text, const char *name) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    IrDiag d;
    ir_diag_init(&d, ir_diag_buffer_fn, &b);
    json_t *v = NULL;
    cr_assert_eq(ir_json_parse(text, strlen(text), name, &d, &v), IR_ESYNTAX, "'%s' parsed", text);
    cr_assert_null(v);
    return b.data;
}

Test(json, syntax_errors_located) {
    char *e = parse_error("{\n  \"a\": 1,\n  \"b\": tru\n}\n", "f.json");
    cr_assert(strstr(e, "f.json:3:"), "%s", e);
    cr_assert(strstr(e, "  \"b\": tru\n"), "no source line: %s", e);
    free(e);
    e = parse_error("{\"a\": 1, \"a\": 2}", "d.json");
    cr_assert(strstr(e, "d.json:1:") && strstr(e, "duplicate object key"), "%s", e);
    free(e);
    e = parse_error("{\"a\": [1, 2", "t.json");
    cr_assert(strstr(e, "t.json:1:"), "%s", e);
    free(e);
    e = parse_error("{} {}", "x.json");
    cr_assert(strstr(e, "x.json:1:"), "%s", e);
    free(e);
}

Test(json, shape_errors_name_the_path) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    IrDiag d;
    ir_diag_init(&d, ir_diag_buffer_fn, &b);
    json_t *doc = parse_ok("{\"rows\": [{\"v\": 1}, {\"v\": \"x\"}, {\"w\": 2.5}], \"n\": null, \"i\": 1.5}");
    IrJsonAt at = {.file = "r.json", .diag = &d};
    const json_t *rows = ir_json_member(doc, "rows", IR_JSON_ARRAY, true, &at);
    cr_assert(rows);
    IrJsonAt rat = ir_json_at_key(&at, "rows");
    IrJsonAt r1 = ir_json_at_index(&rat, 1), r2 = ir_json_at_index(&rat, 2);
    cr_assert(ir_json_member(json_array_get(rows, 0), "v", IR_JSON_NUMBER, true, &at));
    cr_assert_null(ir_json_member(json_array_get(rows, 1), "v", IR_JSON_NUMBER, true, &r1));
    cr_assert_null(ir_json_member(json_array_get(rows, 2), "v", IR_JSON_NUMBER, true, &r2));
    cr_assert_null(ir_json_member(json_array_get(rows, 2), "v", IR_JSON_NUMBER, false, &r2));
    cr_assert(ir_json_member(doc, "n", IR_JSON_NUMBER_OR_NULL, true, &at));
    cr_assert(isnan(ir_json_number_value(json_object_get(doc, "n"))));
    cr_assert_null(ir_json_member(doc, "i", IR_JSON_INTEGER, true, &at));
    cr_assert_not(ir_json_check(doc, IR_JSON_ARRAY, &at));
    cr_assert_str_eq(b.data, "r.json: error: rows[1].v: expected a number\n"
                             "r.json: error: rows[2].v: missing\n"
                             "r.json: error: i: expected an integer\n"
                             "r.json: error: expected an array\n");
    ir_strbuf_free(&b);
    json_decref(doc);
}

/* ---- the baseline of `irtool validate --corpus` -------------------------------------------- */

static int validate(const char *corpus, const char *baseline, TuRun *r) {
    const char *args[] = {"validate", "--corpus", corpus, "--baseline", baseline, NULL};
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, r));
    return r->status;
}

/* The corpus baseline rewritten by jansson with `flags` (indent, sorted keys), entries reversed
 * when asked: the same data, laid out another way. */
static char *relaid_baseline(const char *dir, size_t flags, bool reverse) {
    char *src = tu_source_path("corpus/validate/baseline.json");
    json_error_t e;
    json_t *doc = json_load_file(src, 0, &e);
    cr_assert(doc, "%s", e.text);
    if (reverse) {
        json_t *en = json_object_get(doc, "entries"), *rev = json_array();
        for (size_t i = json_array_size(en); i-- > 0;) json_array_append(rev, json_array_get(en, i));
        json_object_set_new(doc, "entries", rev);
    }
    char *out = tu_path_join(dir, reverse ? "sorted.json" : "indented.json");
    cr_assert_eq(json_dump_file(doc, out, flags | JSON_REAL_PRECISION(17)), 0);
    json_decref(doc);
    free(src);
    return out;
}

Test(json_baseline, reindented_and_reordered_corpus_baseline) {
    char *dir = tu_mkdtemp();
    char *corpus = tu_source_path("corpus/validate");
    char *ind = relaid_baseline(dir, JSON_INDENT(2), false);
    char *text = tu_read_file(ind, NULL);
    cr_assert(strstr(text, "\n    {\n      \"entry\": \"mlp.default\",\n      \"output\": \"y\",\n"), "%s", text);
    TuRun r;
    cr_assert_eq(validate(corpus, ind, &r), 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, " passed, 0 failed, 0 errors"), "%s", r.out);
    tu_run_free(&r);
    char *sorted = relaid_baseline(dir, JSON_SORT_KEYS | JSON_COMPACT, true);
    char *st = tu_read_file(sorted, NULL);
    cr_assert(!strncmp(st, "{\"entries\":[{\"cosine\":", 22), "%s", st);
    cr_assert_eq(validate(corpus, sorted, &r), 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, " passed, 0 failed, 0 errors"), "%s", r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(corpus), free(ind), free(text), free(sorted), free(st);
}

/* A one-entry corpus (mlp, pass default) with the given baseline text; returns irtool's stderr. */
static char *bad_baseline(const char *text, int want_status) {
    char *dir = tu_mkdtemp();
    char *man = tu_path_join(dir, "manifest.txt"), *base = tu_path_join(dir, "baseline.json");
    char *mlp = tu_source_path("corpus/mlp.ir"), line[4096];
    snprintf(line, sizeof line, "m %s random:1 default\n", mlp);
    cr_assert(tu_write_file(man, line, strlen(line)));
    if (text) cr_assert(tu_write_file(base, text, strlen(text)));
    TuRun r;
    cr_assert_eq(validate(dir, base, &r), want_status, "%s%s", r.out, r.err);
    if (want_status == 2) cr_assert(!strstr(r.out, "pass m"), "the corpus ran with a bad baseline: %s", r.out);
    char *err = strdup(r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(man), free(base), free(mlp);
    return err;
}

Test(json_baseline, valid_variants_accepted) {
    static const char *ok[] = {
        "{\"entries\": [{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}]}",
        /* reals, nulls, other members, other orders and whitespace */
        "{ \"entries\" :\n[ { \"cosine\" : 1.0 , \"max_abs_err\" : 0.0,\n\"output\":\"y\",\"entry\":\"m\", \"note\": [1, {}] } ],"
        " \"margin\": \"any\", \"version\": 2 }",
        "{\"entries\": [{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": null, \"cosine\": null}]}",
        /* escapes in strings: "m" written as \u006d */
        "{\"entries\": [{\"entry\": \"\\u006d\", \"output\": \"y\", \"max_abs_err\": 1e-300, \"cosine\": 0.5E0}]}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) free(bad_baseline(ok[i], 0));
}

Test(json_baseline, wrong_shapes_located) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"entries\": [\n  {\"entry\": \"m\", \"output\": \"y\",, }\n]}", "baseline.json:2:"},
        {"[]", "baseline.json: error: expected an object"},
        {"{\"rows\": []}", "baseline.json: error: entries: missing"},
        {"{\"entries\": {}}", "baseline.json: error: entries: expected an array"},
        {"{\"entries\": [{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}, 7]}",
         "baseline.json: error: entries[1]: expected an object"},
        {"{\"entries\": [{\"entry\": 5, \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}]}",
         "baseline.json: error: entries[0].entry: expected a string"},
        {"{\"entries\": [{\"entry\": \"a\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1},"
         "{\"entry\": \"b\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1},"
         "{\"entry\": \"c\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1},"
         "{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": \"1\"}]}",
         "baseline.json: error: entries[3].cosine: expected a number or null"},
        {"{\"entries\": [{\"entry\": \"m\", \"max_abs_err\": 0, \"cosine\": 1}]}",
         "baseline.json: error: entries[0].output: missing"},
        {"{\"entries\": [{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": true, \"cosine\": 1}]}",
         "baseline.json: error: entries[0].max_abs_err: expected a number or null"},
        {"{\"entries\": [{\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1},"
         " {\"entry\": \"m\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}]}",
         "baseline.json: error: entries[1]: entry 'm' output 'y' again (first at entries[0])"},
        {"{\"entries\": [{\"entry\": \"m\", \"entry\": \"n\", \"output\": \"y\", \"max_abs_err\": 0, \"cosine\": 1}]}",
         "duplicate object key"},
        {"", "baseline.json:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err = bad_baseline(cases[i].text, 2);
        cr_assert(strstr(err, cases[i].want), "case %zu: expected '%s' in: %s", i, cases[i].want, err);
        free(err);
    }
    char *err = bad_baseline(NULL, 2);
    cr_assert(strstr(err, "cannot read baseline") && strstr(err, "--update-baseline"), "%s", err);
    free(err);
}

/* --update-baseline writes rows that read back: the next run passes against it */
Test(json_baseline, update_then_read_back) {
    char *dir = tu_mkdtemp();
    char *man = tu_path_join(dir, "manifest.txt"), *base = tu_path_join(dir, "b.json");
    char *mlp = tu_source_path("corpus/mlp.ir"), line[4096];
    snprintf(line, sizeof line, "m %s random:1 quantize-fp8\n", mlp);
    cr_assert(tu_write_file(man, line, strlen(line)));
    const char *up[] = {"validate", "--corpus", dir, "--baseline", base, "--update-baseline", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(up, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    char *text = tu_read_file(base, NULL);
    cr_assert(!strncmp(text, "{\n  \"margin\": ", 14) && strstr(text, "\n  \"entries\": [\n    {\"entry\": \"m\", \"output\": \"y\", "),
              "%s", text);
    json_t *doc = parse_ok(text);
    json_t *row = json_array_get(json_object_get(doc, "entries"), 0);
    cr_assert(json_is_real(json_object_get(row, "max_abs_err")) && json_is_real(json_object_get(row, "cosine")), "%s", text);
    cr_assert_eq(validate(dir, base, &r), 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    json_decref(doc);
    tu_rmtree(dir);
    free(dir), free(man), free(base), free(mlp), free(text);
}

/* The validation report (--json) is JSON that jansson reads, keys in their documented order */
Test(json, validate_report_parses) {
    char *dir = tu_mkdtemp(), *rep = tu_path_join(dir, "r.json"), *mlp = tu_source_path("corpus/mlp.ir");
    const char *args[] = {"validate", mlp, "-p", "quantize-fp8", "--random", "1", "--json", rep, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    tu_run_free(&r);
    char *text = tu_read_file(rep, NULL);
    json_t *doc = parse_ok(text);
    const char *keys[] = {"model", "pass", "outputs", "nodes", "first_divergence"};
    size_t i = 0;
    const char *k;
    json_t *m;
    json_object_foreach(doc, k, m) cr_assert_str_eq(k, keys[i++]);
    cr_assert_eq(i, 5);
    json_t *metrics = json_object_get(json_array_get(json_object_get(doc, "outputs"), 0), "metrics");
    cr_assert(json_is_real(json_object_get(metrics, "cosine")), "%s", text);
    cr_assert(json_is_integer(json_object_get(metrics, "numel")), "%s", text);
    json_decref(doc);
    tu_rmtree(dir);
    free(dir), free(rep), free(mlp), free(text);
}
