// SPDX-License-Identifier: MIT
// The icicle graph of gpusample's HTML report (output/html.c writes the
// data; this file is compiled into gpusample).  Data: the JSON of the
// element #gs-data (layout in output/html.c).  Every name from the
// profile reaches the page through textContent, never as markup.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('gs-data').textContent);
  var ui = document.getElementById('fg-ui');
  var VIEWS = [['wall', 'Wall time'], ['cpu', D.dump ? 'Threads (a dump: stacks now)' : 'CPU time'],
    ['gpu', 'GPU samples']];
  var KINDS = ['Python', 'native', 'kernel', 'GPU', 'other'];
  var ROW = 18, MIN_PX = 2, MAX_DRAWN = 4000;
  var n = D.nodes.length / 2 + 1, nf = D.frames.length;
  var parent = new Int32Array(n), frame = new Int32Array(n);
  var i, k;
  parent[0] = -1;
  frame[0] = -1;
  for (i = 1; i < n; i++) {
    parent[i] = D.nodes[2 * i - 2];
    frame[i] = D.nodes[2 * i - 1];
  }
  // children of each node (CSR: kids[first[k] .. first[k + 1]))
  var first = new Int32Array(n + 1), kids = new Int32Array(Math.max(n - 1, 0));
  for (i = 1; i < n; i++) first[parent[i] + 1]++;
  for (i = 0; i < n; i++) first[i + 1] += first[i];
  var fill = first.slice(0, n);
  for (i = 1; i < n; i++) kids[fill[parent[i]]++] = i;

  var state = { view: 0, filter: 'all', zoom: 0, query: '' };
  var self = new Float64Array(n), tot = new Float64Array(n), match = new Uint8Array(nf);
  var views = [];
  for (i = 0; i < VIEWS.length; i++) if (D.total[i] > 0) views.push(i);
  if (!views.length) {
    ui.textContent = 'No samples to draw.';
    return;
  }
  state.view = views[0];
  // Wall time of all threads adds up the idle ones (queue feeders, pools):
  // the graph opens on the main thread of the main process (the one with
  // the most time), as the report's "Where the time goes" does.
  (function () {
    var t, best = -1, most = 0, per = new Float64Array(D.threads.length), r = D.rows;
    for (i = 0; i < r.length; i += 5) per[r[i + 1]] += r[i + 2 + state.view];
    for (t = 0; t < D.threads.length; t++) {
      var th = D.threads[t];
      if (th[3] === 'main' && th[0] === th[1] && per[t] > most) { best = t; most = per[t]; }
    }
    if (best >= 0 && state.view !== 2) state.filter = 't:' + best;
  })();

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v) {
    if (state.view === 2) return Math.round(v) + ' samples';
    if (D.dump) return Math.round(v) + ' threads';
    if (v >= 1e6) return (v / 1e6).toFixed(2) + ' s';
    return (v / 1e3).toFixed(1) + ' ms';
  }
  function pct(v, of) {
    return of > 0 ? (100 * v / of).toFixed(1) + '%' : '0%';
  }
  function name(k) {
    return k === 0 ? 'all' : D.frames[frame[k]][0];
  }

  // filter: "all", "r:ROLE", "p:PID", "t:INDEX"
  function keeps(t) {
    var f = state.filter, th = D.threads[t];
    if (f === 'all') return true;
    if (f.charAt(0) === 'r') return th[3] === f.slice(2);
    if (f.charAt(0) === 'p') return String(th[0]) === f.slice(2) && th[1] >= 0;
    return String(t) === f.slice(2);
  }
  function compute() {
    var pass = D.threads.map(function (th, t) { return keeps(t); });
    var r = D.rows, v = state.view;
    self.fill(0);
    for (i = 0; i < r.length; i += 5) if (pass[r[i + 1]]) self[r[i]] += r[i + 2 + v];
    tot.set(self);
    for (k = n - 1; k > 0; k--) tot[parent[k]] += tot[k];
  }

  // ---- controls ----
  var bar = el('div', 'fg-bar');
  var viewSel = el('select');
  viewSel.id = 'fg-view';
  views.forEach(function (v) {
    var o = el('option', null, VIEWS[v][1]);
    o.value = String(v);
    viewSel.appendChild(o);
  });
  var filt = el('select');
  filt.id = 'fg-filter';
  function opt(value, text) {
    var o = el('option', null, text);
    o.value = value;
    filt.appendChild(o);
  }
  opt('all', 'all threads');
  var seen = {};
  D.threads.forEach(function (th) {
    if (th[3] && !seen['r' + th[3]]) { seen['r' + th[3]] = 1; opt('r:' + th[3], 'role: ' + th[3]); }
  });
  D.threads.forEach(function (th) {
    if (th[1] >= 0 && !seen['p' + th[0]]) {
      seen['p' + th[0]] = 1;
      opt('p:' + th[0], 'process: ' + th[4] + ' (' + th[0] + ')');
    }
  });
  D.threads.forEach(function (th, t) {
    opt('t:' + t, 'thread: ' + th[2] + (th[1] >= 0 ? ' (' + th[1] + ')' : ''));
  });
  var search = el('input');
  search.id = 'fg-search';
  search.type = 'search';
  search.placeholder = 'search frames';
  var reset = el('button', null, 'reset zoom');
  reset.id = 'fg-reset';
  var status = el('span', 'fg-status');
  status.id = 'fg-status';
  filt.value = state.filter;
  [viewSel, filt, search, reset, status].forEach(function (e) { bar.appendChild(e); });
  var legend = el('div', 'fg-legend');
  KINDS.forEach(function (kn, j) {
    legend.appendChild(el('span', 'f k' + j, kn));
  });
  var note = el('p', 'fg-note');
  note.id = 'fg-note';
  var graph = el('div', 'fg-graph');
  graph.id = 'fg-graph';
  var tip = el('div', 'fg-tip');
  tip.id = 'fg-tip';
  [bar, legend, note, graph, tip].forEach(function (e) { ui.appendChild(e); });

  // ---- search ----
  function setQuery(q) {
    state.query = q;
    var ql = q.toLowerCase();
    for (var f = 0; f < nf; f++)
      match[f] = ql !== '' && D.frames[f][0].toLowerCase().indexOf(ql) >= 0 ? 1 : 0;
  }
  // time under matching frames, each sample once (a match under a match is not added)
  function matchedShare() {
    var under = new Uint8Array(n), sum = 0, frames = 0;
    for (k = 1; k < n; k++) {
      var m = match[frame[k]];
      if (m && !under[parent[k]]) sum += tot[k];
      under[k] = under[parent[k]] | m;
      frames += m;
    }
    return [sum, frames];
  }

  // ---- drawing ----
  function draw() {
    var W = Math.max(graph.clientWidth, 200), z = state.zoom, all = tot[0];
    var path = [], p, drawn = 0, hidden = 0, depth = 0;
    for (p = z; p > 0; p = parent[p]) path.unshift(p);
    path.unshift(0);
    var frag = document.createDocumentFragment();
    function box(k, x, w, d) {
      var f = k === 0 ? null : D.frames[frame[k]];
      var b = el('div', 'f k' + (f ? f[1] : 4) + (f && match[frame[k]] ? ' m' : ''), name(k));
      b.style.left = x + 'px';
      b.style.top = d * ROW + 'px';
      b.style.width = Math.max(w - 1, 1) + 'px';
      b.setAttribute('data-n', String(k));
      frag.appendChild(b);
      drawn++;
      if (d > depth) depth = d;
    }
    // the zoomed node's callers: full width, above it
    for (i = 0; i < path.length - 1; i++) box(path[i], 0, W, i);
    var base = path.length - 1, scale = tot[z] > 0 ? W / tot[z] : 0;
    var queue = [[z, 0, base]];
    for (var q = 0; q < queue.length; q++) {
      var it = queue[q], node = it[0], x = it[1], d = it[2];
      box(node, x, node === z ? W : tot[node] * scale, d);
      var ks = Array.prototype.slice.call(kids, first[node], first[node + 1]);
      ks.sort(function (a, b) { return tot[b] - tot[a]; });
      for (var j = 0; j < ks.length; j++) {
        var c = ks[j], w = tot[c] * scale;
        if (tot[c] <= 0) continue;
        if (w < MIN_PX || drawn + queue.length - q >= MAX_DRAWN) {
          hidden++;
        } else {
          queue.push([c, x, d + 1]);
        }
        x += w;
      }
    }
    graph.textContent = '';
    graph.style.height = (depth + 1) * ROW + 'px';
    graph.appendChild(frag);
    graph.classList.toggle('searching', state.query !== '');
    var s = fmt(all) + ' in view';
    if (z) s += '; zoomed to ' + name(z) + ' (' + pct(tot[z], all) + ')';
    if (state.query) {
      var ms = matchedShare();
      s += '; search: ' + ms[1] + ' frames match, ' + fmt(ms[0]) + ' (' + pct(ms[0], all) + ')';
    }
    status.textContent = s;
    var cut = D.cut.nodes ? D.cut.nodes + ' of ' + D.cut.of + ' stack frames under 1/' +
      D.cut.below + ' of every view are folded into their callers (counted as their self time). ' : '';
    note.textContent = cut + (hidden ? hidden + ' frames narrower than ' + MIN_PX +
      ' px are not drawn (zoom in to see them).' : '');
  }
  function update() {
    compute();
    if (state.zoom && tot[state.zoom] <= 0) state.zoom = 0;
    draw();
  }

  // ---- events ----
  function nodeOf(e) {
    var t = e.target;
    return t && t.getAttribute && t.getAttribute('data-n') !== null ? +t.getAttribute('data-n') : -1;
  }
  graph.addEventListener('click', function (e) {
    var k = nodeOf(e);
    if (k >= 0) { state.zoom = k; draw(); }
  });
  graph.addEventListener('mousemove', function (e) {
    var k = nodeOf(e);
    if (k < 0) { tip.style.display = 'none'; return; }
    var f = k ? D.frames[frame[k]] : null, all = tot[0];
    var lines = [name(k), 'total ' + fmt(tot[k]) + ' (' + pct(tot[k], all) + ')',
      'self ' + fmt(self[k]) + ' (' + pct(self[k], all) + ')'];
    if (f) {
      lines.push(KINDS[f[1]] + (f[2] ? ' \u2014 ' + f[2] + (f[3] > 0 ? ':' + f[3] : '') : ''));
    }
    tip.textContent = lines.join('\n');
    tip.style.display = 'block';
    tip.style.left = Math.min(e.pageX + 12, document.body.scrollWidth - 420) + 'px';
    tip.style.top = e.pageY + 14 + 'px';
  });
  graph.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  viewSel.addEventListener('change', function () { state.view = +viewSel.value; update(); });
  filt.addEventListener('change', function () { state.filter = filt.value; update(); });
  search.addEventListener('input', function () { setQuery(search.value); draw(); });
  reset.addEventListener('click', function () { state.zoom = 0; draw(); });
  window.addEventListener('resize', draw);
  update();
})();
