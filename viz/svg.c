/* SVG post-processing with libxml2: checks Graphviz's SVG is well-formed, adds CSS classes per
 * op class to node groups (looked up by the stable id) and a <style> element, and optionally
 * wraps the result in a self-contained HTML viewer (viz/viewer.js and viewer.css inline, with
 * the renderer's JSON for the side panel and search; no network). Output depends only on the
 * input bytes.
 */
#include "viz/viz_internal.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlsave.h>
#include <stdlib.h>
#include <string.h>

static const char svg_css[] =
    "g.node:hover path, g.node:hover polygon, g.node:hover ellipse { stroke-width: 2.5; }\n"
    "g.node.search-hit path, g.node.search-hit polygon, g.node.search-hit ellipse "
    "{ stroke: #0050ff; stroke-width: 4; }\n"
    "g.node.first-divergence text { font-weight: bold; }\n";

/* The viewer's style and script, viz/viewer.css and viz/viewer.js, embedded by CMake. */
#include "viz_viewer_assets.h"

static const char html_head[] = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>";
static const char html_style[] = "</title>\n<style>\n";
static const char html_body[] =
    "</style></head><body>\n"
    "<div id=\"bar\"><b>irtool viz</b>"
    "<input id=\"q\" type=\"search\" placeholder=\"search: node, op, group kind, value\" size=\"34\"/>"
    "<button id=\"prev\" title=\"previous hit (shift+enter)\">&lt;</button>"
    "<button id=\"next\" title=\"next hit (enter)\">&gt;</button><span id=\"info\"></span>"
    "<button id=\"home\" title=\"back to the inputs\">inputs</button><button id=\"fit\">fit all</button>"
    "<button id=\"collapse\">collapse groups</button><button id=\"expand\">expand groups</button>"
    "<button id=\"fdiv\">first divergence</button>"
    "<span id=\"hint\">click: details, wheel: zoom, drag: pan</span></div>\n<div id=\"view\">\n";
static const char html_after_svg[] =
    "\n</div>\n<div id=\"panel\"></div>\n<div id=\"mini\" title=\"minimap: click to move there\"></div>\n"
    "<script type=\"application/json\" id=\"irdata\">";
static const char html_script[] = "</script>\n<script>\n";
static const char html_tail[] = "</script>\n</body></html>\n";

static const VizCssEntry *find_css(const VizCssEntry *css, size_t n, const char *id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int k = strcmp(css[mid].id, id);
        if (k == 0) return &css[mid];
        if (k < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static void tag_nodes(xmlNodePtr n, const VizCssEntry *css, size_t n_css) {
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE) continue;
        if (xmlStrcmp(n->name, BAD_CAST "g") == 0) {
            xmlChar *cls = xmlGetProp(n, BAD_CAST "class");
            xmlChar *id = xmlGetProp(n, BAD_CAST "id");
            if (cls && id && xmlStrcmp(cls, BAD_CAST "node") == 0) {
                const VizCssEntry *e = find_css(css, n_css, (const char *)id);
                const char *extra = e ? e->css : strncmp((const char *)id, "legend_", 7) == 0 ? "legend" : NULL;
                if (extra) {
                    size_t need = strlen(extra) + 8;
                    char *v = malloc(need);
                    if (v) {
                        snprintf(v, need, "node %s", extra);
                        xmlSetProp(n, BAD_CAST "class", BAD_CAST v);
                        free(v);
                    }
                }
            }
            xmlFree(cls);
            xmlFree(id);
        }
        tag_nodes(n->children, css, n_css);
    }
}

static void put_html_text(IrStrBuf *b, const char *s) {
    for (; s && *s; s++) {
        if (*s == '<') ir_strbuf_puts(b, "&lt;");
        else if (*s == '>') ir_strbuf_puts(b, "&gt;");
        else if (*s == '&') ir_strbuf_puts(b, "&amp;");
        else ir_strbuf_putc(b, *s);
    }
}

IrStatus viz_svg_postprocess(const char *svg, size_t len, const VizCssEntry *css, size_t n_css, bool html,
                             const char *page_data, const char *title, IrDiag *diag, IrStrBuf *out) {
    xmlDocPtr doc = xmlReadMemory(svg, (int)len, "graph.svg", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                       XML_PARSE_NOWARNING | XML_PARSE_HUGE);
    if (!doc) {
        ir_diag_error(diag, "viz: Graphviz produced SVG that is not well-formed XML");
        return IR_EVERIFY;
    }
    xmlNodePtr root = xmlDocGetRootElement(doc);
    if (!root || xmlStrcmp(root->name, BAD_CAST "svg") != 0) {
        xmlFreeDoc(doc);
        ir_diag_error(diag, "viz: Graphviz output has no <svg> root");
        return IR_EVERIFY;
    }
    tag_nodes(root->children, css, n_css);
    xmlNodePtr style = xmlNewDocNode(doc, NULL, BAD_CAST "style", NULL);
    if (style) {
        xmlSetProp(style, BAD_CAST "type", BAD_CAST "text/css");
        xmlNodeAddContent(style, BAD_CAST svg_css);
        if (root->children) xmlAddPrevSibling(root->children, style);
        else xmlAddChild(root, style);
    }
    IrStatus s = IR_OK;
    xmlBufferPtr buf = xmlBufferCreate();
    if (!buf) { s = IR_ENOMEM; goto done; }
    if (html) {
        /* the <svg> element alone, inline in the page */
        if (xmlNodeDump(buf, doc, root, 0, 0) < 0) { s = IR_ENOMEM; goto done; }
        ir_strbuf_puts(out, html_head);
        put_html_text(out, title && *title ? title : "graph");
        ir_strbuf_puts(out, html_style);
        ir_strbuf_puts(out, viz_viewer_css);
        ir_strbuf_puts(out, html_body);
        ir_strbuf_append(out, (const char *)xmlBufferContent(buf), (size_t)xmlBufferLength(buf));
        ir_strbuf_puts(out, html_after_svg);
        ir_strbuf_puts(out, page_data ? page_data : "{\"boxes\":{},\"groups\":{}}");
        ir_strbuf_puts(out, html_script);
        ir_strbuf_puts(out, viz_viewer_js);
        ir_strbuf_puts(out, html_tail);
    } else {
        xmlChar *mem = NULL;
        int n = 0;
        xmlDocDumpMemoryEnc(doc, &mem, &n, "UTF-8");
        if (!mem) { s = IR_ENOMEM; goto done; }
        ir_strbuf_append(out, (const char *)mem, (size_t)n);
        xmlFree(mem);
    }
done:
    if (buf) xmlBufferFree(buf);
    xmlFreeDoc(doc);
    if (s == IR_OK && out->failed) s = IR_ENOMEM;
    if (s) ir_diag_error(diag, "viz: out of memory writing SVG");
    return s;
}
