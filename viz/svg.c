/* SVG post-processing with libxml2: checks Graphviz's SVG is well-formed, adds CSS classes per
 * op class to node groups (looked up by the stable id) and a <style> element, and optionally
 * wraps the result in a self-contained HTML viewer (inline CSS and JS: pan, zoom, search by
 * node name; no network). Output depends only on the input bytes.
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

static const char html_head[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>";
static const char html_mid[] =
    "</title>\n<style>\n"
    "html,body{margin:0;height:100%;font-family:Helvetica,Arial,sans-serif;}\n"
    "#bar{position:fixed;top:0;left:0;right:0;height:34px;background:#f3f3f3;border-bottom:1px solid #ccc;"
    "display:flex;align-items:center;gap:8px;padding:0 8px;z-index:2;}\n"
    "#view{position:absolute;top:35px;left:0;right:0;bottom:0;overflow:hidden;cursor:grab;}\n"
    "#view svg{width:100%;height:100%;}\n"
    "</style></head><body>\n"
    "<div id=\"bar\"><b>irtool viz</b><input id=\"q\" type=\"search\" placeholder=\"search node name\" size=\"28\"/>"
    "<button id=\"next\">next</button><button id=\"fit\">fit</button><span id=\"info\"></span>"
    "<span style=\"color:#777\">wheel: zoom, drag: pan</span></div>\n<div id=\"view\">\n";
static const char html_tail[] =
    "\n</div>\n<script>\n"
    "(function(){\n"
    "var view=document.getElementById('view'),svg=view.querySelector('svg');\n"
    "svg.removeAttribute('width');svg.removeAttribute('height');\n"
    "var vb0=svg.viewBox.baseVal,full={x:vb0.x,y:vb0.y,w:vb0.width,h:vb0.height},vb=Object.assign({},full);\n"
    "function apply(){svg.setAttribute('viewBox',vb.x+' '+vb.y+' '+vb.w+' '+vb.h);}\n"
    "function fit(){vb=Object.assign({},full);apply();}\n"
    "function pt(ev){var r=svg.getBoundingClientRect(),s=Math.max(vb.w/r.width,vb.h/r.height);"
    "return {x:vb.x+(ev.clientX-r.left)*s,y:vb.y+(ev.clientY-r.top)*s,s:s};}\n"
    "view.addEventListener('wheel',function(ev){ev.preventDefault();var p=pt(ev),f=ev.deltaY<0?0.8:1.25;"
    "vb.x=p.x-(p.x-vb.x)*f;vb.y=p.y-(p.y-vb.y)*f;vb.w*=f;vb.h*=f;apply();},{passive:false});\n"
    "var drag=null;view.addEventListener('mousedown',function(ev){drag={x:ev.clientX,y:ev.clientY,s:pt(ev).s};"
    "view.style.cursor='grabbing';});\n"
    "window.addEventListener('mousemove',function(ev){if(!drag)return;vb.x-=(ev.clientX-drag.x)*drag.s;"
    "vb.y-=(ev.clientY-drag.y)*drag.s;drag.x=ev.clientX;drag.y=ev.clientY;apply();});\n"
    "window.addEventListener('mouseup',function(){drag=null;view.style.cursor='grab';});\n"
    "var hits=[],cur=-1,q=document.getElementById('q'),info=document.getElementById('info');\n"
    "function show(i){if(!hits.length)return;cur=(i+hits.length)%hits.length;var b=hits[cur].getBBox(),"
    "m=svg.querySelector('g.graph').transform.baseVal.consolidate();var x=b.x,y=b.y;"
    "if(m){x+=m.matrix.e;y+=m.matrix.f;}var r=svg.getBoundingClientRect(),w=Math.max(b.width*4,400),"
    "h=w*r.height/Math.max(r.width,1);"
    "vb={x:x+b.width/2-w/2,y:y+b.height/2-h/2,w:w,h:h};apply();info.textContent=(cur+1)+'/'+hits.length;}\n"
    "function search(){hits.forEach(function(n){n.classList.remove('search-hit');});hits=[];var t=q.value.toLowerCase();"
    "if(t){svg.querySelectorAll('g.node').forEach(function(n){var tt=n.querySelector('title'),"
    "s=(n.id+' '+(tt?tt.textContent:'')+' '+n.textContent).toLowerCase();"
    "if(s.indexOf(t)>=0){n.classList.add('search-hit');hits.push(n);}});}"
    "info.textContent=t?hits.length+' found':'';if(hits.length)show(0);}\n"
    "q.addEventListener('input',search);q.addEventListener('keydown',function(ev){if(ev.key==='Enter')show(cur+1);});\n"
    "document.getElementById('next').onclick=function(){show(cur+1);};\n"
    "document.getElementById('fit').onclick=fit;fit();\n"
    "var m=/^#search=(.*)$/.exec(location.hash);if(m){q.value=decodeURIComponent(m[1]);search();}\n"
    "})();\n</script>\n</body></html>\n";

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
                             const char *title, IrDiag *diag, IrStrBuf *out) {
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
        ir_strbuf_puts(out, html_mid);
        ir_strbuf_append(out, (const char *)xmlBufferContent(buf), (size_t)xmlBufferLength(buf));
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
