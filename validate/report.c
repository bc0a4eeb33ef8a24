/* Validation reports: a human table, JSON with stable keys (through jansson, ir/json.h), and
 * JUnit XML written with libxml2. Reports are built into buffers or files; printing them is
 * the CLI's job. Same result, same bytes.
 */
#include "validate/validate.h"
#include "ir/json.h"

#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void index_str(const IrCompareMetrics *m, IrStrBuf *b, const char *open, const char *close) {
    ir_strbuf_puts(b, open);
    for (uint32_t d = 0; d < m->rank; d++) ir_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)m->worst_index[d]);
    ir_strbuf_puts(b, close);
}

static json_t *worst_index(const IrCompareMetrics *m) {
    json_t *a = json_array();
    for (uint32_t d = 0; d < m->rank; d++) ir_json_push(a, json_integer(m->worst_index[d]));
    return a;
}

static json_t *json_metrics(const IrCompareMetrics *m) {
    json_t *o = json_object();
    bool ok = ir_json_set(o, "comparable", json_boolean(m->comparable));
    if (!m->comparable) {
        ok &= ir_json_set(o, "reason", ir_json_string(m->reason));
        return ok ? o : (json_decref(o), NULL);
    }
    ok &= ir_json_set(o, "numel", json_integer(m->numel));
    ok &= ir_json_set(o, "max_abs_err", ir_json_real(m->max_abs_err));
    ok &= ir_json_set(o, "max_rel_err", ir_json_real(m->max_rel_err));
    ok &= ir_json_set(o, "mean_abs_err", ir_json_real(m->mean_abs_err));
    ok &= ir_json_set(o, "rms_err", ir_json_real(m->rms_err));
    ok &= ir_json_set(o, "cosine", ir_json_real(m->cosine));
    /* a u64 past jansson's int64: null, as for "no finite ulp distance" */
    ok &= ir_json_set(o, "max_ulp", m->max_ulp > (uint64_t)INT64_MAX ? json_null() : json_integer((json_int_t)m->max_ulp));
    ok &= ir_json_set(o, "frac_within", ir_json_real(m->frac_within));
    ok &= ir_json_set(o, "worst_index", worst_index(m));
    ok &= ir_json_set(o, "worst_ref", ir_json_real(m->worst_ref));
    ok &= ir_json_set(o, "worst_cand", ir_json_real(m->worst_cand));
    ok &= ir_json_set(o, "argmax_agreement", ir_json_real(m->argmax_agreement < 0 ? NAN : m->argmax_agreement));
    ok &= ir_json_set(o, "min_passing_rtol", ir_json_real(m->min_rtol));
    ok &= ir_json_set(o, "min_passing_atol", ir_json_real(m->min_atol));
    ok &= ir_json_set(o, "nan_mismatch", json_integer((json_int_t)m->nan_mismatch));
    return ok ? o : (json_decref(o), NULL);
}

static json_t *json_output(const IrOutputResult *r) {
    json_t *o = json_object(), *tol = json_object();
    bool ok = ir_json_set(o, "name", ir_json_string(r->name));
    ok &= ir_json_set(o, "pass", json_boolean(r->m.pass));
    ok &= ir_json_set(tol, "rtol", ir_json_real(r->tol.rtol));
    ok &= ir_json_set(tol, "atol", ir_json_real(r->tol.atol));
    ok &= ir_json_set(tol, "min_cosine", ir_json_real(r->tol.min_cosine));
    ok &= ir_json_set(tol, "by_cosine", json_boolean(r->tol.by_cosine));
    ok &= ir_json_set(o, "tolerance", tol);
    ok &= ir_json_set(o, "metrics", json_metrics(&r->m));
    return ok ? o : (json_decref(o), NULL);
}

static json_t *json_node(const IrNodeError *e) { /* what viz --highlight reads */
    json_t *o = json_object();
    bool ok = ir_json_set(o, "node", ir_json_string(e->name));
    ok &= ir_json_set(o, "op", ir_json_string(e->op));
    ok &= ir_json_set(o, "max_rel_err", ir_json_real(isfinite(e->max_rel_err) ? e->max_rel_err : 1e300));
    ok &= ir_json_set(o, "max_abs_err", ir_json_real(e->max_abs_err));
    ok &= ir_json_set(o, "cosine", ir_json_real(e->cosine));
    ok &= ir_json_set(o, "pass", json_boolean(e->pass));
    return ok ? o : (json_decref(o), NULL);
}

static json_t *json_divergence(const IrDivergence *d) {
    if (!d->found) return json_null();
    json_t *o = json_object();
    bool ok = ir_json_set(o, "node", ir_json_string(d->node_name));
    ok &= ir_json_set(o, "op", ir_json_string(d->op));
    ok &= ir_json_set(o, "value", ir_json_string(d->value));
    ok &= ir_json_set(o, "location", ir_json_string(d->location));
    ok &= ir_json_set(o, "reference_nodes", ir_json_string(d->ref_nodes));
    ok &= ir_json_set(o, "note", ir_json_string(d->note));
    ok &= ir_json_set(o, "metrics", json_metrics(&d->m));
    return ok ? o : (json_decref(o), NULL);
}

static json_t *report_tree(const IrValidateResult *r, const char *label) {
    json_t *o = json_object(), *outs = json_array(), *nodes = json_array();
    bool ok = ir_json_set(o, "model", ir_json_string(label));
    ok &= ir_json_set(o, "pass", json_boolean(r->pass));
    for (uint32_t i = 0; i < r->n_outputs; i++) ok &= ir_json_push(outs, json_output(&r->outputs[i]));
    ok &= ir_json_set(o, "outputs", outs);
    for (uint32_t i = 0; i < r->n_nodes; i++) ok &= ir_json_push(nodes, json_node(&r->nodes[i]));
    ok &= ir_json_set(o, "nodes", nodes);
    ok &= ir_json_set(o, "first_divergence", json_divergence(&r->div));
    return ok ? o : (json_decref(o), NULL);
}

void ir_validate_report_json(const IrValidateResult *r, const char *label, IrStrBuf *b) {
    json_t *o = report_tree(r, label);
    ir_json_write(o, IR_JSON_ROWS, b);
    json_decref(o);
}

static void metrics_line(IrStrBuf *b, const IrCompareMetrics *m) {
    if (!m->comparable) {
        ir_strbuf_puts(b, m->reason);
        return;
    }
    ir_strbuf_printf(b, "max_abs_err=%.6g max_rel_err=%.6g mean_abs_err=%.6g rms=%.6g cosine=%.9g max_ulp=%llu "
                        "within=%.4f%% worst=",
                     m->max_abs_err, m->max_rel_err, m->mean_abs_err, m->rms_err, m->cosine,
                     (unsigned long long)m->max_ulp, 100 * m->frac_within);
    index_str(m, b, "[", "]");
    ir_strbuf_printf(b, " ref=%.9g cand=%.9g min_rtol=%.3g min_atol=%.3g", m->worst_ref, m->worst_cand, m->min_rtol,
                     m->min_atol);
    if (m->argmax_agreement >= 0) ir_strbuf_printf(b, " argmax_agree=%.4f", m->argmax_agreement);
}

static void divergence_text(IrStrBuf *b, const IrDivergence *d) {
    ir_strbuf_printf(b, "first divergence: node '%s' (%s) result %%%s", d->node_name, d->op, d->value);
    if (d->location && d->location[0]) ir_strbuf_printf(b, " at %s", d->location);
    ir_strbuf_printf(b, ", reference node(s) '%s'\n  ", d->ref_nodes);
    metrics_line(b, &d->m);
    ir_strbuf_putc(b, '\n');
    if (d->note && d->note[0]) ir_strbuf_printf(b, "  note: %s\n", d->note);
}

void ir_validate_report_text(const IrValidateResult *r, IrStrBuf *b) {
    ir_strbuf_printf(b, "%-16s %-4s %12s %12s %12s %12s %12s %10s %9s  %s\n", "output", "", "max_abs", "max_rel",
                     "mean_abs", "rms", "cosine", "max_ulp", "within", "worst (ref -> cand)");
    for (uint32_t i = 0; i < r->n_outputs; i++) {
        const IrOutputResult *o = &r->outputs[i];
        const IrCompareMetrics *m = &o->m;
        if (!m->comparable) {
            ir_strbuf_printf(b, "%-16s FAIL %s\n", o->name, m->reason);
            continue;
        }
        ir_strbuf_printf(b, "%-16s %-4s %12.4g %12.4g %12.4g %12.4g %12.9f %10llu %8.4f%%  ", o->name,
                         m->pass ? "ok" : "FAIL", m->max_abs_err, m->max_rel_err, m->mean_abs_err, m->rms_err, m->cosine,
                         (unsigned long long)m->max_ulp, 100 * m->frac_within);
        index_str(m, b, "[", "]");
        ir_strbuf_printf(b, " %.6g -> %.6g\n", m->worst_ref, m->worst_cand);
        if (o->tol.by_cosine) ir_strbuf_printf(b, "%-16s      judged by cosine >= %.9g", "", o->tol.min_cosine);
        else ir_strbuf_printf(b, "%-16s      rtol=%g atol=%g; would pass with rtol>=%.3g (atol=%g) or atol>=%.3g (rtol=%g)",
                              "", o->tol.rtol, o->tol.atol, m->min_rtol, o->tol.atol, m->min_atol, o->tol.rtol);
        if (m->argmax_agreement >= 0) ir_strbuf_printf(b, "; argmax agreement %.4f", m->argmax_agreement);
        ir_strbuf_putc(b, '\n');
    }
    if (r->div.found) divergence_text(b, &r->div);
    else if (!r->pass) ir_strbuf_puts(b, "first divergence: none found among matched intermediates\n");
    ir_strbuf_puts(b, r->pass ? "PASS\n" : "FAIL\n");
}

/* ---- JUnit --------------------------------------------------------------------------------- */

static void add_prop(xmlNodePtr props, const char *name, double v) {
    char buf[64];
    if (isfinite(v)) snprintf(buf, sizeof buf, "%.9g", v);
    else snprintf(buf, sizeof buf, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    xmlNodePtr p = xmlNewChild(props, NULL, BAD_CAST "property", NULL);
    xmlNewProp(p, BAD_CAST "name", BAD_CAST name);
    xmlNewProp(p, BAD_CAST "value", BAD_CAST buf);
}

static void add_case(xmlNodePtr suite, const char *label, const IrValidateResult *r, uint32_t i, int *failures) {
    const IrOutputResult *o = &r->outputs[i];
    xmlNodePtr tc = xmlNewChild(suite, NULL, BAD_CAST "testcase", NULL);
    xmlNewProp(tc, BAD_CAST "classname", BAD_CAST label);
    xmlNewProp(tc, BAD_CAST "name", BAD_CAST o->name);
    const IrCompareMetrics *m = &o->m;
    if (m->comparable) {
        xmlNodePtr props = xmlNewChild(tc, NULL, BAD_CAST "properties", NULL);
        add_prop(props, "max_abs_err", m->max_abs_err);
        add_prop(props, "max_rel_err", m->max_rel_err);
        add_prop(props, "mean_abs_err", m->mean_abs_err);
        add_prop(props, "rms_err", m->rms_err);
        add_prop(props, "cosine", m->cosine);
        add_prop(props, "max_ulp", m->max_ulp == UINT64_MAX ? INFINITY : (double)m->max_ulp);
        add_prop(props, "frac_within", m->frac_within);
    }
    if (m->pass) return;
    (*failures)++;
    IrStrBuf b;
    ir_strbuf_init(&b);
    metrics_line(&b, m);
    ir_strbuf_putc(&b, '\n');
    if (r->div.found) divergence_text(&b, &r->div);
    char msg[256];
    const char *why = m->reason[0] ? m->reason : "out of tolerance";
    if (r->div.found)
        snprintf(msg, sizeof msg, "output %s: %s; first diverging node '%s' (%s)", o->name, why, r->div.node_name,
                 r->div.op);
    else snprintf(msg, sizeof msg, "output %s: %s", o->name, why);
    xmlNodePtr f = xmlNewChild(tc, NULL, BAD_CAST "failure", NULL);
    xmlNewProp(f, BAD_CAST "type", BAD_CAST "accuracy");
    xmlNewProp(f, BAD_CAST "message", BAD_CAST msg);
    xmlNodeAddContent(f, BAD_CAST(b.data ? b.data : ""));
    ir_strbuf_free(&b);
}

IrStatus ir_validate_report_junit(const char *path, const char *suite_name, uint32_t n, const char *const *labels,
                                  const IrValidateResult *const *results, const char *const *errors, IrDiag *diag) {
    xmlDocPtr doc = xmlNewDoc(BAD_CAST "1.0");
    if (!doc) return IR_ENOMEM;
    xmlNodePtr root = xmlNewNode(NULL, BAD_CAST "testsuites");
    xmlDocSetRootElement(doc, root);
    xmlNodePtr suite = xmlNewChild(root, NULL, BAD_CAST "testsuite", NULL);
    xmlNewProp(suite, BAD_CAST "name", BAD_CAST suite_name);
    int tests = 0, failures = 0, nerr = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (errors && errors[k]) {
            xmlNodePtr tc = xmlNewChild(suite, NULL, BAD_CAST "testcase", NULL);
            xmlNewProp(tc, BAD_CAST "classname", BAD_CAST labels[k]);
            xmlNewProp(tc, BAD_CAST "name", BAD_CAST "run");
            xmlNodePtr e = xmlNewChild(tc, NULL, BAD_CAST "error", NULL);
            xmlNewProp(e, BAD_CAST "message", BAD_CAST errors[k]);
            tests++, nerr++;
            continue;
        }
        if (!results[k]) continue;
        for (uint32_t i = 0; i < results[k]->n_outputs; i++, tests++) add_case(suite, labels[k], results[k], i, &failures);
    }
    char num[32];
    snprintf(num, sizeof num, "%d", tests);
    xmlNewProp(suite, BAD_CAST "tests", BAD_CAST num);
    snprintf(num, sizeof num, "%d", failures);
    xmlNewProp(suite, BAD_CAST "failures", BAD_CAST num);
    snprintf(num, sizeof num, "%d", nerr);
    xmlNewProp(suite, BAD_CAST "errors", BAD_CAST num);
    xmlChar *mem = NULL;
    int len = 0;
    xmlDocDumpFormatMemoryEnc(doc, &mem, &len, "UTF-8", 1);
    xmlFreeDoc(doc);
    if (!mem) return IR_ENOMEM;
    IrStatus s = ir_write_file_atomic(path, mem, (size_t)len, diag);
    xmlFree(mem);
    return s;
}
