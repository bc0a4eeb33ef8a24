/* The HTML viewer's script (embedded into the page by viz/svg.c; no network). Reads the page's
 * JSON (#irdata: per box and fused group, op, attributes, shapes, weights, errors) and the SVG
 * Graphviz drew: opens on the inputs at a readable zoom, pans and zooms, shows a side panel on
 * click, searches node names, op types, group kinds and value names, collapses and expands
 * fused groups in the page, and keeps a minimap of where the view is.
 */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('irdata').textContent);
  var view = document.getElementById('view'), svg = view.querySelector('svg');
  var G = svg.querySelector('g.graph'), panel = document.getElementById('panel');
  var q = document.getElementById('q'), info = document.getElementById('info');
  svg.removeAttribute('width');
  svg.removeAttribute('height');
  var b0 = svg.viewBox.baseVal, full = {x: b0.x, y: b0.y, w: b0.width, h: b0.height}, vb = copy(full);
  var NS = 'http://www.w3.org/2000/svg';

  function copy(o) { return {x: o.x, y: o.y, w: o.w, h: o.h}; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; });
  }
  /* An element's box in the root SVG's user units (Graphviz translates g.graph). */
  function box(el) {
    var b = el.getBBox(), m = G.transform.baseVal.consolidate(), x = b.x, y = b.y, s = 1;
    if (m) { s = m.matrix.a || 1; x = x * s + m.matrix.e; y = y * s + m.matrix.f; }
    return {x: x, y: y, w: b.width * s, h: b.height * s};
  }
  function screen() { var r = svg.getBoundingClientRect(); return {w: Math.max(r.width, 1), h: Math.max(r.height, 1)}; }
  function apply() { svg.setAttribute('viewBox', vb.x + ' ' + vb.y + ' ' + vb.w + ' ' + vb.h); mini(); }
  function fit() { vb = copy(full); apply(); }
  /* A view at scale user units per pixel with cx in the middle of what the side panel leaves
   * visible and top at the top edge. */
  function look(cx, top, scale) {
    var r = screen(), w = r.w * scale, h = r.h * scale;
    var pw = panel.classList.contains('open') ? panel.offsetWidth : 0;
    vb = {x: cx - (r.w - pw) / 2 * scale, y: top, w: w, h: h};
    apply();
  }
  /* The start: the inputs at about one user unit per pixel (10 pt labels readable), or the
   * whole graph in the middle at that zoom when it fits (not blown up). */
  function home() {
    var r = screen();
    if (full.w <= r.w && full.h <= r.h) {
      vb = {x: full.x + full.w / 2 - r.w / 2, y: full.y + full.h / 2 - r.h / 2, w: r.w, h: r.h};
      apply();
      return;
    }
    var ins = svg.querySelectorAll('g.node[id^="in_"]'), bx = null;
    for (var i = 0; i < ins.length; i++) {
      var b = box(ins[i]);
      if (!bx) bx = b;
      else { var x1 = Math.min(bx.x, b.x), y1 = Math.min(bx.y, b.y);
        bx = {x: x1, y: y1, w: Math.max(bx.x + bx.w, b.x + b.w) - x1, h: Math.max(bx.y + bx.h, b.y + b.h) - y1}; }
    }
    if (!bx) bx = {x: full.x + full.w / 2, y: full.y, w: 0, h: 0};
    look(bx.x + bx.w / 2, bx.y - 24, 1);
  }

  /* ---- pan, zoom, click ---- */
  function pt(ev) {
    var r = svg.getBoundingClientRect(), s = Math.max(vb.w / r.width, vb.h / r.height);
    var ox = (r.width * s - vb.w) / 2, oy = (r.height * s - vb.h) / 2;
    return {x: vb.x - ox + (ev.clientX - r.left) * s, y: vb.y - oy + (ev.clientY - r.top) * s, s: s};
  }
  view.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var p = pt(ev), f = ev.deltaY < 0 ? 0.8 : 1.25;
    vb.x = p.x - (p.x - vb.x) * f; vb.y = p.y - (p.y - vb.y) * f; vb.w *= f; vb.h *= f;
    apply();
  }, {passive: false});
  var drag = null;
  view.addEventListener('mousedown', function (ev) {
    drag = {x: ev.clientX, y: ev.clientY, x0: ev.clientX, y0: ev.clientY, s: pt(ev).s};
    view.style.cursor = 'grabbing';
  });
  window.addEventListener('mousemove', function (ev) {
    if (!drag) return;
    vb.x -= (ev.clientX - drag.x) * drag.s; vb.y -= (ev.clientY - drag.y) * drag.s;
    drag.x = ev.clientX; drag.y = ev.clientY;
    apply();
  });
  window.addEventListener('mouseup', function (ev) {
    var d = drag;
    drag = null;
    view.style.cursor = 'grab';
    if (!d || Math.abs(ev.clientX - d.x0) + Math.abs(ev.clientY - d.y0) > 4) return;
    var t = ev.target && ev.target.closest ? ev.target : null;
    if (!t || !view.contains(t)) return;
    var n = t.closest('g.node'), c = t.closest('g.cluster');
    if (n && D.boxes[n.id]) select(n);
    else if (c && D.groups[c.id]) select(c);
  });

  /* ---- the side panel ---- */
  var selected = null;
  function rows(list, f) {
    if (!list || !list.length) return '';
    return '<table>' + list.map(function (r) { return '<tr>' + f(r) + '</tr>'; }).join('') + '</table>';
  }
  function bytes(n) {
    return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' KiB' : (n / 1048576).toFixed(1) + ' MiB';
  }
  function num(x) { return typeof x === 'number' ? (Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(3) : +x.toPrecision(6)) : x; }
  function errHtml(e, fd) {
    var h = '';
    if (e) {
      h += '<h3>Error against the reference</h3><table>';
      h += '<tr><td class="k">' + (e.by_cosine ? '1 - cosine' : 'error') + '</td><td>' + num(e.metric) + '</td></tr>';
      if ('cosine' in e) h += '<tr><td class="k">cosine</td><td>' + num(e.cosine) + '</td></tr>';
      if ('max_abs_err' in e) h += '<tr><td class="k">max abs error</td><td>' + num(e.max_abs_err) + '</td></tr>';
      if ('max_rel_err' in e) h += '<tr><td class="k">max rel error</td><td>' + num(e.max_rel_err) + '</td></tr>';
      h += '</table>';
    }
    if (fd) h += '<p class="fd">first divergence: the first node out of tolerance</p>';
    return h;
  }
  function panelHtml(d, isGroup, id) {
    if (d.io) {
      return '<h2>' + esc(d.io) + '</h2><div class="sub">' + esc(d.label.replace(/\\n/g, ' ')) + '</div>';
    }
    var h = '<h2>' + esc(d.op) + (d.kind ? ' <span class="sub">' + esc(d.kind) + '</span>' : '') + '</h2>';
    h += '<div class="sub">' + esc(d.name || d.label || '') + '</div>';
    if (d.class) h += '<div class="sub">class: ' + esc(d['class']) + (d.members ? ', ' + d.members + ' nodes inside' : '') + '</div>';
    if (d.group && D.groups[d.group]) h += '<div class="sub">in group ' + esc(D.groups[d.group].name) + '</div>';
    if (d.loc) h += '<div class="sub">' + esc(d.loc) + '</div>';
    if (d.op === 'segment') h += '<div class="sub">' + esc((d.label || '').replace(/\\n/g, ' ')) + '</div>';
    if (d.outs && d.outs.length) h += '<h3>Outputs</h3>' + rows(d.outs, function (r) { return '<td class="k">%' + esc(r[0]) + '</td><td>' + esc(r[1]) + '</td>'; });
    if (d.ins && d.ins.length) h += '<h3>Inputs</h3>' + rows(d.ins, function (r) { return '<td class="k">%' + esc(r[0]) + '</td><td>' + esc(r[1]) + '</td>'; });
    if (d.weights && d.weights.length) h += '<h3>Weights</h3>' + rows(d.weights, function (r) { return '<td class="k">' + esc(r[0]) + '</td><td>' + esc(r[1]) + ' ' + bytes(r[2]) + '</td>'; });
    if (d.attrs && d.attrs.length) h += '<h3>Attributes</h3>' + rows(d.attrs, function (r) { return '<td class="k">' + esc(r[0]) + '</td><td>' + esc(r[1]) + '</td>'; });
    h += errHtml(d.err, d.first_div);
    if (isGroup) h += '<button class="act" id="toggle">' + (collapsed[id] ? 'expand group' : 'collapse group') + '</button>';
    return h;
  }
  function select(el) {
    if (selected) selected.classList.remove('selected');
    selected = el;
    el.classList.add('selected');
    var isGroup = el.classList.contains('cluster'), d = isGroup ? D.groups[el.id] : D.boxes[el.id];
    panel.innerHTML = '<button class="close" title="close">&times;</button>' + panelHtml(d, isGroup, el.id);
    panel.classList.add('open');
    document.body.classList.add('panel-open');
    panel.querySelector('.close').onclick = function () {
      panel.classList.remove('open'); document.body.classList.remove('panel-open');
      if (selected) selected.classList.remove('selected');
      selected = null;
    };
    var t = panel.querySelector('#toggle');
    if (t) t.onclick = function () { toggle(el.id); select(el); };
  }

  /* ---- collapsing fused groups in the page ---- */
  var collapsed = {}, edgesOf = null;
  function inGroup(id, gid) {
    for (var g = D.boxes[id] && D.boxes[id].group; g; g = D.groups[g] && D.groups[g].group)
      if (g === gid) return true;
    return false;
  }
  function hiddenBy(id) {
    for (var g = D.boxes[id] && D.boxes[id].group; g; g = D.groups[g] && D.groups[g].group)
      if (collapsed[g]) return true;
    return false;
  }
  function refresh() {
    if (!edgesOf) {
      edgesOf = [];
      svg.querySelectorAll('g.edge').forEach(function (e) {
        var t = e.querySelector('title'), m = t ? /^(.*)->(.*)$/.exec(t.textContent) : null;
        if (m) edgesOf.push({el: e, a: m[1], b: m[2]});
      });
    }
    Object.keys(D.boxes).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && D.boxes[id].group) el.style.display = hiddenBy(id) ? 'none' : '';
    });
    edgesOf.forEach(function (e) { e.el.style.display = hiddenBy(e.a) && hiddenBy(e.b) ? 'none' : ''; });
    Object.keys(D.groups).forEach(function (gid) {
      var el = document.getElementById(gid);
      if (!el) return;
      el.classList.toggle('collapsed', !!collapsed[gid]);
      var note = el.querySelector('text.collapsed-note');
      if (collapsed[gid] && !note) {
        var b = el.getBBox(), n = 0;
        Object.keys(D.boxes).forEach(function (id) { if (inGroup(id, gid)) n++; });
        note = document.createElementNS(NS, 'text');
        note.setAttribute('class', 'collapsed-note');
        note.setAttribute('x', b.x + b.width / 2);
        note.setAttribute('y', b.y + b.height / 2);
        note.setAttribute('text-anchor', 'middle');
        note.textContent = n + ' nodes collapsed (click to expand)';
        el.appendChild(note);
      } else if (!collapsed[gid] && note) {
        note.remove();
      }
    });
  }
  function toggle(gid) { collapsed[gid] = !collapsed[gid]; refresh(); }
  function setAll(on) { Object.keys(D.groups).forEach(function (g) { collapsed[g] = on; }); refresh(); }

  /* ---- search: node names, op types, group kinds, value names ---- */
  var index = [];
  function words(d) {
    var w = [d.name, d.op, d.kind, d['class'], d.label, d.io];
    ['outs', 'ins', 'weights'].forEach(function (k) { (d[k] || []).forEach(function (r) { w.push(r[0]); }); });
    return w.filter(Boolean).join(' ').toLowerCase();
  }
  Object.keys(D.boxes).forEach(function (id) { index.push({id: id, text: (id + ' ' + words(D.boxes[id]))}); });
  Object.keys(D.groups).forEach(function (id) { index.push({id: id, text: ('group ' + words(D.groups[id]))}); });
  var hits = [], cur = -1;
  function show(i) {
    if (!hits.length) return;
    cur = (i + hits.length) % hits.length;
    var el = document.getElementById(hits[cur]);
    if (!el) return;
    var d = D.boxes[hits[cur]];
    if (d && hiddenBy(hits[cur])) { for (var g = d.group; g; g = D.groups[g] && D.groups[g].group) collapsed[g] = false; refresh(); }
    select(el);
    var b = box(el), r = screen(), scale = Math.max(1, (b.w * 1.6) / r.w), top = b.y - r.h * scale * 0.2;
    /* keep the title of the group holding the hit in view */
    var gid = d ? d.group : null, gel = gid ? document.getElementById(gid) : null;
    if (gel) { var gb = box(gel); if (b.y - gb.y < r.h * scale * 0.6) top = Math.min(top, gb.y - 12); }
    look(b.x + b.w / 2, top, scale);
    info.textContent = (cur + 1) + ' / ' + hits.length;
  }
  function search() {
    hits.forEach(function (id) { var e = document.getElementById(id); if (e) e.classList.remove('search-hit'); });
    hits = [];
    cur = -1;
    var t = q.value.trim().toLowerCase();
    if (t) index.forEach(function (e) { if (e.text.indexOf(t) >= 0) hits.push(e.id); });
    hits.forEach(function (id) { var e = document.getElementById(id); if (e) e.classList.add('search-hit'); });
    info.textContent = t ? hits.length + ' found' : '';
    if (hits.length) show(0);
  }
  q.addEventListener('input', search);
  q.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') show(cur + (ev.shiftKey ? -1 : 1)); });
  document.getElementById('next').onclick = function () { show(cur + 1); };
  document.getElementById('prev').onclick = function () { show(cur - 1); };
  document.getElementById('fit').onclick = fit;
  document.getElementById('home').onclick = home;
  document.getElementById('collapse').onclick = function () { setAll(true); };
  document.getElementById('expand').onclick = function () { setAll(false); };
  var fdb = document.getElementById('fdiv');
  var fdEl = svg.querySelector('g.node.first-divergence');
  if (!fdEl) Object.keys(D.groups).forEach(function (g) { if (D.groups[g].first_div) fdEl = document.getElementById(g); });
  if (fdEl) fdb.onclick = function () { hits = [fdEl.id]; show(0); };
  else fdb.style.display = 'none';

  /* ---- minimap ---- */
  var mbox = document.getElementById('mini'), msvg = document.createElementNS(NS, 'svg'), vp;
  (function () {
    msvg.setAttribute('viewBox', full.x + ' ' + full.y + ' ' + full.w + ' ' + full.h);
    var use = document.createElementNS(NS, 'use');
    use.setAttribute('href', '#' + G.id);
    msvg.appendChild(use);
    vp = document.createElementNS(NS, 'rect');
    vp.setAttribute('class', 'vp');
    msvg.appendChild(vp);
    mbox.appendChild(msvg);
    function go(ev) {
      var r = msvg.getBoundingClientRect(), s = Math.max(full.w / r.width, full.h / r.height);
      var ox = (r.width * s - full.w) / 2, oy = (r.height * s - full.h) / 2;
      var x = full.x - ox + (ev.clientX - r.left) * s, y = full.y - oy + (ev.clientY - r.top) * s;
      vb.x = x - vb.w / 2; vb.y = y - vb.h / 2;
      apply();
    }
    var mdown = false;
    mbox.addEventListener('mousedown', function (ev) { mdown = true; go(ev); ev.stopPropagation(); });
    window.addEventListener('mousemove', function (ev) { if (mdown) go(ev); });
    window.addEventListener('mouseup', function () { mdown = false; });
  })();
  function mini() {
    if (!vp) return;
    vp.setAttribute('x', vb.x); vp.setAttribute('y', vb.y);
    vp.setAttribute('width', vb.w); vp.setAttribute('height', vb.h);
  }

  home();
  var m = /^#search=(.*)$/.exec(location.hash);
  if (m) { q.value = decodeURIComponent(m[1]); search(); }
})();
