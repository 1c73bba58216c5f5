"""The results browser's HTML and JavaScript (:mod:`dpnewton.pipeline.browser` builds the data).

The page reads its data from one JSON script element and draws with Plotly (``Plotly.react``, log
axes); the controls are plain ``<select>`` elements. Element ids the tests use: ``dataset``,
``conversion``, ``epsilon``, ``methods`` (multiple), ``plot-T``, ``plot-runtime``, ``best-table``,
``claims-table``.
"""

from __future__ import annotations

import html
import json

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
.source, .note { color: #555; font-size: 0.9em; }
#controls { display: flex; gap: 1.5em; align-items: flex-start; margin: 0.8em 0; flex-wrap: wrap; }
#controls label { display: flex; flex-direction: column; font-weight: 600; font-size: 0.9em; }
#controls select { margin-top: 0.3em; font-size: 0.95em; }
#methods { min-width: 16em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plot { width: 620px; height: 520px; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr.best td { font-weight: 700; }
tr.tie td { background: #eef6ee; }
.reproduced { color: #1a7f37; } .partly { color: #9a6700; } .not-reproduced { color: #cf222e; }
"""

SCRIPT = r"""
const DATA = JSON.parse(document.getElementById('browser-data').textContent);
const $ = (id) => document.getElementById(id);
function records(table) {
  if (!table) return [];
  return table.rows.map((row) => Object.fromEntries(table.columns.map((c, i) => [c, row[i]])));
}
const BEST = records(DATA.best), CURVES = records(DATA.curves), CLAIMS = records(DATA.claims);
const FLOOR = records(DATA.floor);
const unique = (xs) => [...new Set(xs)];
function fill(select, values, keep, label) {
  const previous = keep ? [...select.selectedOptions].map((o) => o.value) : [];
  select.innerHTML = '';
  for (const v of values) {
    const o = document.createElement('option');
    o.value = String(v); o.textContent = label ? label(v) : String(v);
    select.appendChild(o);
  }
  if (previous.length && values.map(String).includes(previous[0])) select.value = previous[0];
}
function methodOrder(a, b) {
  const ma = DATA.methods[a], mb = DATA.methods[b];
  return (ma ? ma.order : 1e9) - (mb ? mb.order : 1e9) || a.localeCompare(b);
}
function cellRows() {
  const ds = $('dataset').value, conv = $('conversion').value, eps = Number($('epsilon').value);
  return BEST.filter((r) => r.dataset === ds && r.conversion === conv && r.epsilon === eps);
}
function updateConversions() {
  const rows = BEST.filter((r) => r.dataset === $('dataset').value);
  fill($('conversion'), unique(rows.map((r) => r.conversion)).sort(), true);
  updateEpsilons();
}
function updateEpsilons() {
  const rows = BEST.filter((r) => r.dataset === $('dataset').value && r.conversion === $('conversion').value);
  fill($('epsilon'), unique(rows.map((r) => r.epsilon)).sort((a, b) => a - b), true);
  updateMethods();
}
function updateMethods() {
  const select = $('methods');
  const chosen = new Set([...select.selectedOptions].map((o) => o.value));
  const names = unique(cellRows().map((r) => r.method)).sort(methodOrder);
  select.innerHTML = '';
  const anyKept = names.some((n) => chosen.has(n));
  for (const n of names) {
    const o = document.createElement('option');
    o.value = n; o.textContent = DATA.methods[n] ? DATA.methods[n].label : n;
    o.selected = anyKept ? chosen.has(n) : (DATA.methods[n] ? DATA.methods[n].default : true);
    select.appendChild(o);
  }
  select.size = Math.min(14, Math.max(4, names.length));
  draw();
}
function style(name) {
  const m = DATA.methods[name];
  const note = m && m.note ? m.note : '';
  return { color: m ? m.color : '#444', label: (m ? m.label : name) + (note ? ' *' : ''), note };
}
function notes(chosen) {
  const esc = (v) => String(v).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const items = chosen.filter((n) => style(n).note)
    .map((n) => `<li>${esc(style(n).label)}: ${esc(style(n).note)}</li>`);
  $('method-notes').innerHTML = items.length ? '<b>* Non-private parts and caveats of the configurations shown:</b>' +
    `<ul>${items.join('')}</ul>` : '';
}
function traces(x) {
  const chosen = [...$('methods').selectedOptions].map((o) => o.value);
  const cell = cellRows().filter((r) => chosen.includes(r.method));
  const ds = $('dataset').value, conv = $('conversion').value, eps = Number($('epsilon').value);
  const out = [];
  for (const name of chosen) {
    const s = style(name);
    if (DATA.curves) {
      const pts = CURVES.filter((r) => r.dataset === ds && r.conversion === conv && r.epsilon === eps
                                && r.method === name && r.mean !== null && r[x] !== null);
      out.push({ type: 'scatter', mode: 'lines+markers', name: s.label, legendgroup: name,
                 x: pts.map((r) => r[x]), y: pts.map((r) => r.mean),
                 error_y: { type: 'data', array: pts.map((r) => r.se || 0), visible: true, thickness: 1 },
                 line: { color: s.color, width: 1.5 }, marker: { size: 5, color: s.color } });
    }
    const best = cell.filter((r) => r.method === name && r.mean !== null && r[x] !== null);
    out.push({ type: 'scatter', mode: 'markers', name: s.label + ' (best T)', legendgroup: name,
               showlegend: !DATA.curves, x: best.map((r) => r[x]), y: best.map((r) => r.mean),
               error_y: { type: 'data', array: best.map((r) => r.se || 0), visible: true },
               text: best.map((r) => `best T=${r.T}` + (r.at_edge ? ' (grid edge)' : '')),
               marker: { symbol: 'star', size: 13, color: s.color, line: { color: '#000', width: 1 } } });
  }
  const ties = cell.filter((r) => r.tie && r.mean !== null && r[x] !== null);
  out.push({ type: 'scatter', mode: 'markers', name: 'tie set (Welch p >= 0.05 against the lowest mean)',
             x: ties.map((r) => r[x]), y: ties.map((r) => r.mean), hoverinfo: 'skip',
             marker: { symbol: 'circle-open', size: 22, color: '#1a7f37', line: { width: 2 } } });
  const floor = FLOOR.find((r) => r.dataset === ds && r.conversion === conv && r.epsilon === eps);
  return { data: out, floor: floor ? floor.ridge_floor : null };
}
function layout(xTitle, floor) {
  const shapes = floor ? [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: floor, y1: floor,
                            line: { color: '#888', dash: 'dot', width: 1.5 } }] : [];
  return { xaxis: { type: 'log', title: { text: xTitle } },
           yaxis: { type: 'log', title: { text: 'excess loss (mean over seeds, ±1 s.e.)' } },
           margin: { t: 30, r: 10 }, legend: { font: { size: 10 }, orientation: 'h', y: -0.18 }, shapes };
}
function bestTable() {
  const chosen = new Set([...$('methods').selectedOptions].map((o) => o.value));
  notes([...chosen]);
  const rows = cellRows().filter((r) => chosen.has(r.method) || r.tie)
    .sort((a, b) => (a.mean === null) - (b.mean === null) || a.mean - b.mean);
  const fmt = (v) => (v === null || v === undefined ? 'n/a' : String(v));
  const rank = (r) => (r.is_best ? 'lowest' : r.tie ? 'tie' : r.ranked === false ? 'not ranked (non-private)' : '');
  let h = '<tr><th>configuration</th><th>best T</th><th>mean excess loss</th><th>s.e.</th>' +
          '<th>runtime (s)</th><th>seeds</th><th>tie set</th><th>non-private parts, caveats</th></tr>';
  for (const r of rows) {
    const cls = r.is_best ? 'best tie' : r.tie ? 'tie' : '';
    h += `<tr class="${cls}"><td>${style(r.method).label}${chosen.has(r.method) ? '' : ' (not shown)'}</td>` +
         `<td>${fmt(r.T)}${r.at_edge ? ' (edge)' : ''}</td><td>${fmt(r.mean)}</td><td>${fmt(r.se)}</td>` +
         `<td>${fmt(r.runtime)}</td><td>${fmt(r.n_seeds)}</td><td>${rank(r)}</td>` +
         `<td>${style(r.method).note}</td></tr>`;
  }
  $('best-table').innerHTML = h;
}
function claimsTable() {
  const ds = $('dataset').value;
  const rows = CLAIMS.filter((r) => r.dataset === ds || r.dataset === 'all');
  const esc = (v) => String(v === null ? '' : v).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  let h = '<tr><th>claim</th><th>setting</th><th>conversion</th><th>dataset</th><th>verdict</th>' +
          '<th>reason</th><th>ours</th></tr>';
  for (const r of rows) {
    h += `<tr><td>${esc(r.claim)}</td><td>${esc(r.setting)}</td><td>${esc(r.conversion)}</td>` +
         `<td>${esc(r.dataset)}</td><td class="${esc(r.verdict).replace(/ /g, '-')}">${esc(r.verdict)}</td>` +
         `<td>${esc(r.reason)}</td><td>${esc(r.ours)}</td></tr>`;
  }
  $('claims-table').innerHTML = DATA.claims ? h : '<tr><td>no claims table in these results</td></tr>';
}
function draw() {
  const t = traces('T'), r = traces('runtime');
  Plotly.react('plot-T', t.data, layout('T (iterations)', t.floor), { responsive: true });
  Plotly.react('plot-runtime', r.data, layout(DATA.curves ? 'runtime (s, update steps)' :
    'runtime at best T (s, update steps)', r.floor), { responsive: true });
  bestTable();
  claimsTable();
}
fill($('dataset'), unique(BEST.map((r) => r.dataset)));
$('dataset').addEventListener('change', updateConversions);
$('conversion').addEventListener('change', updateEpsilons);
$('epsilon').addEventListener('change', updateMethods);
$('methods').addEventListener('change', draw);
$('all').addEventListener('click', () => { for (const o of $('methods').options) o.selected = true; draw(); });
$('defaults').addEventListener('click', () => {
  for (const o of $('methods').options) o.selected = DATA.methods[o.value] ? DATA.methods[o.value].default : true;
  draw();
});
updateConversions();
"""


def render(data: dict, plotly_js: str) -> str:
    """The page: ``data`` (:func:`dpnewton.pipeline.browser.page_data`) as a JSON script element,
    ``plotly_js`` inlined, no external resource."""
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    title = html.escape(data["title"])
    curves_note = ("lines: every T of the grid (summary table); stars: each configuration's best T"
                   if data["curves"] else "stars: each configuration's best T (no per-T table in these results)")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{STYLE}</style>
<script>{plotly_js}</script>
</head>
<body>
<h1>{title}</h1>
<div class="source">{html.escape(data["source"])}</div>
<div id="controls">
<label>dataset <select id="dataset"></select></label>
<label>conversion <select id="conversion"></select></label>
<label>epsilon <select id="epsilon"></select></label>
<label>configurations (ctrl/shift-click) <select id="methods" multiple></select>
<span><button id="defaults" type="button">registered defaults</button>
<button id="all" type="button">all</button></span></label>
</div>
<div class="note">{html.escape(curves_note)}. Best T is selected <b>non-privately</b> (argmin over T of the
mean excess loss over seeds). Green rings: {html.escape(data["tie_rule"])}. Grey dotted line: the
Gaussian ridge floor F* of the cell (a local quadratic model, not a lower bound), where the tables have it.</div>
<div class="plots"><div id="plot-T" class="plot"></div><div id="plot-runtime" class="plot"></div></div>
<div id="method-notes" class="note"></div>
<h2>Best T of the cell (lowest mean and tie set)</h2>
<table id="best-table"></table>
<h2>Claim verdicts for the dataset</h2>
<table id="claims-table"></table>
<script type="application/json" id="browser-data">{payload}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""
