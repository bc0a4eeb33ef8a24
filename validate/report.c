/* Validation reports: a human table, JSON with stable keys and fixed number formatting, and
 * JUnit XML written with libxml2. Reports are built into buffers or files; printing them is
 * the CLI's job. Same result, same bytes.
 */
#include "validate/validate.h"

#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void ir_json_number(IrStrBuf *b, double v) {
    if (!isfinite(v)) ir_strbuf_puts(b, "null");
    else ir_strbuf_printf(b, "%.9g", v);
}

static void json_string(IrStrBuf *b, const char *s) {
    ir_strbuf_putc(b, '"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') ir_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20) ir_strbuf_printf(b, "\\u%04x", c);
        else ir_strbuf_putc(b, (char)c);
    }
    ir_strbuf_putc(b, '"');
}

static void index_str(const IrCompareMetrics *m, IrStrBuf *b, const char *open, const char *close) {
    ir_strbuf_puts(b, open);
    for (uint32_t d = 0; d < m->rank; d++) ir_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)m->worst_index[d]);
    ir_strbuf_puts(b, close);
}

static void json_metrics(IrStrBuf *b, const IrCompareMetrics *m) {
    if (!m->comparable) {
        ir_strbuf_puts(b, "{\"comparable\": false, \"reason\": ");
        json_string(b, m->reason);
        ir_strbuf_puts(b, "}");
        return;
    }
#define NUM(key, v)                                  \
    do {                                             \
        ir_strbuf_puts(b, ", \"" key "\": ");        \
        ir_json_number(b, v);                        \
    } while (0)
    ir_strbuf_printf(b, "{\"comparable\": true, \"numel\": %lld", (long long)m->numel);
    NUM("max_abs_err", m->max_abs_err);
    NUM("max_rel_err", m->max_rel_err);
    NUM("mean_abs_err", m->mean_abs_err);
    NUM("rms_err", m->rms_err);
    NUM("cosine", m->cosine);
    if (m->max_ulp == UINT64_MAX) ir_strbuf_puts(b, ", \"max_ulp\": null");
    else ir_strbuf_printf(b, ", \"max_ulp\": %llu", (unsigned long long)m->max_ulp);
    NUM("frac_within", m->frac_within);
    ir_strbuf_puts(b, ", \"worst_index\": ");
    index_str(m, b, "[", "]");
    NUM("worst_ref", m->worst_ref);
    NUM("worst_cand", m->worst_cand);
    NUM("argmax_agreement", m->argmax_agreement < 0 ? NAN : m->argmax_agreement);
    NUM("min_passing_rtol", m->min_rtol);
    NUM("min_passing_atol", m->min_atol);
    ir_strbuf_printf(b, ", \"nan_mismatch\": %llu}", (unsigned long long)m->nan_mismatch);
#undef NUM
}

void ir_validate_report_json(const IrValidateResult *r, const char *label, IrStrBuf *b) {
    ir_strbuf_puts(b, "{\n  \"model\": ");
    json_string(b, label);
    ir_strbuf_printf(b, ",\n  \"pass\": %s,\n  \"outputs\": [", r->pass ? "true" : "false");
    for (uint32_t i = 0; i < r->n_outputs; i++) {
        const IrOutputResult *o = &r->outputs[i];
        ir_strbuf_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        json_string(b, o->name);
        ir_strbuf_printf(b, ", \"pass\": %s, \"tolerance\": {\"rtol\": ", o->m.pass ? "true" : "false");
        ir_json_number(b, o->tol.rtol);
        ir_strbuf_puts(b, ", \"atol\": ");
        ir_json_number(b, o->tol.atol);
        ir_strbuf_puts(b, ", \"min_cosine\": ");
        ir_json_number(b, o->tol.min_cosine);
        ir_strbuf_printf(b, ", \"by_cosine\": %s}, \"metrics\": ", o->tol.by_cosine ? "true" : "false");
        json_metrics(b, &o->m);
        ir_strbuf_puts(b, "}");
    }
    ir_strbuf_puts(b, r->n_outputs ? "\n  ],\n  \"nodes\": [" : "],\n  \"nodes\": [");
    for (uint32_t i = 0; i < r->n_nodes; i++) { /* what viz --highlight reads */
        const IrNodeError *e = &r->nodes[i];
        ir_strbuf_puts(b, i ? ",\n    {\"node\": " : "\n    {\"node\": ");
        json_string(b, e->name);
        ir_strbuf_puts(b, ", \"op\": ");
        json_string(b, e->op);
        ir_strbuf_puts(b, ", \"max_rel_err\": ");
        ir_json_number(b, isfinite(e->max_rel_err) ? e->max_rel_err : 1e300);
        ir_strbuf_puts(b, ", \"max_abs_err\": ");
        ir_json_number(b, e->max_abs_err);
        ir_strbuf_puts(b, ", \"cosine\": ");
        ir_json_number(b, e->cosine);
        ir_strbuf_printf(b, ", \"pass\": %s}", e->pass ? "true" : "false");
    }
    ir_strbuf_puts(b, r->n_nodes ? "\n  ],\n  \"first_divergence\": " : "],\n  \"first_divergence\": ");
    const IrDivergence *d = &r->div;
    if (!d->found) {
        ir_strbuf_puts(b, "null\n}\n");
        return;
    }
    ir_strbuf_puts(b, "{\"node\": ");
    json_string(b, d->node_name);
    ir_strbuf_puts(b, ", \"op\": ");
    json_string(b, d->op);
    ir_strbuf_puts(b, ", \"value\": ");
    json_string(b, d->value);
    ir_strbuf_puts(b, ", \"location\": ");
    json_string(b, d->location);
    ir_strbuf_puts(b, ", \"reference_nodes\": ");
    json_string(b, d->ref_nodes);
    ir_strbuf_puts(b, ", \"note\": ");
    json_string(b, d->note);
    ir_strbuf_puts(b, ", \"metrics\": ");
    json_metrics(b, &d->m);
    ir_strbuf_puts(b, "}\n}\n");
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
