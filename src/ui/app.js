// strata's query UI: a PromQL console and a cardinality page over strata's HTTP API.
//
// Plain browser JavaScript, no build step (an ES module, loaded by index.html). The expression
// is edited in CodeMirror 6 with Prometheus' PromQL package (highlighting, syntax errors
// underlined, completion of functions and of metric and label names from strata's API):
// ui/vendor/promql-editor.min.js, built from src/ui/editor/. The page state lives in the URL
// (?q=, mode=, range=, end=, step=, tab=, page=) so every view is a link; opening a URL with
// q= runs the query at once. The history of queries is kept in localStorage. Charts are drawn by uPlot
// (ui/vendor/uPlot.iife.min.js). Elements the tests read carry data-* attributes: #status
// data-state (idle, loading, done, error), #graph data-series / data-points / data-drawn,
// tables data-rows.
import { createEditor } from './vendor/promql-editor.min.js';

(function () {
  const HISTORY_KEY = 'strata.queryHistory';
  const HISTORY_MAX = 50;
  // Beyond this many series a chart is unreadable and slow; the table still lists them all
  // (up to TABLE_ROWS_MAX).
  const SERIES_PLOTTED_MAX = 100;
  const TABLE_ROWS_MAX = 1000;
  // Prometheus' UI picks range / 250 as the default step.
  const AUTO_POINTS = 250;

  const $ = (id) => document.getElementById(id);
  const el = {
    form: $('query-form'),
    range: $('range'),
    end: $('end'),
    endLabel: $('end-label'),
    step: $('step'),
    history: $('history'),
    status: $('status'),
    notes: $('notes'),
    summary: $('result-summary'),
    graph: $('graph'),
    graphEmpty: $('graph-empty'),
    table: $('result-table'),
    stats: $('stats'),
    examples: $('examples'),
  };

  // The PromQL editor in place of a textarea: Enter runs, Shift+Enter adds a line, Enter with
  // the completion list open picks the entry. Completion asks the API relative to this page
  // (`api/v1/...`), so a reverse-proxy prefix is kept.
  const editor = createEditor({
    parent: $('expr'),
    placeholder: 'PromQL expression, e.g. sum by (handler) (rate(strata_http_requests_total[5m]))   ' +
      '(Enter runs, Shift+Enter adds a line)',
    apiUrl: new URL('.', location.href).href.replace(/\/$/, ''),
    onRun: () => runQuery(),
  });
  const exprText = () => editor.getValue();

  let plot = null;
  let lastMatrix = null;
  let generation = 0;
  let inFlight = null;

  // ---------------------------------------------------------------- durations and times

  const UNIT_SECONDS = { y: 31536000, w: 604800, d: 86400, h: 3600, m: 60, s: 1, ms: 0.001 };

  // Prometheus duration ("1h30m", "5m", "500ms") or plain seconds ("90", "1.5") to seconds.
  function parseDuration(text) {
    const t = String(text || '').trim();
    if (t === '') return null;
    if (/^\d+(\.\d+)?$/.test(t)) return Number(t);
    const re = /(\d+)(ms|y|w|d|h|m|s)/g;
    let total = 0;
    let consumed = 0;
    let match;
    while ((match = re.exec(t)) !== null) {
      if (match.index !== consumed) return null;
      total += Number(match[1]) * UNIT_SECONDS[match[2]];
      consumed = re.lastIndex;
    }
    return consumed === t.length && total > 0 ? total : null;
  }

  // Seconds to the shortest Prometheus duration ("1h30m", "15s", "250ms").
  function formatDuration(seconds) {
    let ms = Math.round(seconds * 1000);
    if (ms <= 0) return '0s';
    let out = '';
    for (const unit of ['y', 'w', 'd', 'h', 'm', 's']) {
      const size = UNIT_SECONDS[unit] * 1000;
      if (ms >= size) {
        out += Math.floor(ms / size) + unit;
        ms %= size;
      }
    }
    if (ms > 0) out += ms + 'ms';
    return out;
  }

  // The end time in unix seconds: the picker's local time, or now when it is empty.
  function endSeconds() {
    if (!el.end.value) return Date.now() / 1000;
    const t = new Date(el.end.value).getTime();
    return Number.isFinite(t) ? t / 1000 : Date.now() / 1000;
  }

  // `datetime-local` wants local time without a zone: 2024-05-01T13:45:00.
  function toLocalInput(seconds) {
    const d = new Date(seconds * 1000);
    const pad = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:` +
      `${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  // URL `end=`: unix seconds or anything Date parses (RFC 3339).
  function parseEndParam(text) {
    if (!text) return null;
    if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
    const t = new Date(text).getTime();
    return Number.isFinite(t) ? t / 1000 : null;
  }

  function formatTime(seconds) {
    return new Date(seconds * 1000).toISOString().replace('T', ' ').replace(/\.000Z$/, 'Z');
  }

  // ---------------------------------------------------------------- values and labels

  function parseSampleValue(text) {
    if (text === '+Inf') return Infinity;
    if (text === '-Inf') return -Infinity;
    return Number(text);
  }

  const SI = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  // Axis labels: 3 significant digits with an SI suffix.
  function formatAxisValue(v) {
    if (v == null || !Number.isFinite(v)) return '';
    const abs = Math.abs(v);
    for (const [size, suffix] of SI) {
      if (abs >= size) return +(v / size).toPrecision(3) + suffix;
    }
    if (abs !== 0 && abs < 0.001) return v.toExponential(1);
    return String(+v.toPrecision(3));
  }

  function escapeLabelValue(v) {
    return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
  }

  // `name{a="1", b="2"}`, as Prometheus prints a series.
  function seriesName(metric) {
    const name = metric.__name__ || '';
    const labels = Object.keys(metric)
      .filter((k) => k !== '__name__')
      .sort()
      .map((k) => `${k}="${escapeLabelValue(metric[k])}"`);
    if (labels.length === 0) return name || '{}';
    return `${name}{${labels.join(', ')}}`;
  }

  // Distinct colours for many series: hues spaced by the golden angle.
  function seriesColor(i) {
    const hue = (i * 137.508 + 200) % 360;
    return `hsl(${hue.toFixed(1)}, 65%, 45%)`;
  }

  // ---------------------------------------------------------------- history

  function loadHistory() {
    try {
      const list = JSON.parse(localStorage.getItem(HISTORY_KEY) || '[]');
      return Array.isArray(list) ? list.filter((q) => typeof q === 'string') : [];
    } catch (e) {
      return [];
    }
  }

  function saveHistory(expr) {
    const list = [expr, ...loadHistory().filter((q) => q !== expr)].slice(0, HISTORY_MAX);
    try {
      localStorage.setItem(HISTORY_KEY, JSON.stringify(list));
    } catch (e) {
      // Storage full or disabled: the history is a convenience only.
    }
    renderHistory();
  }

  function renderHistory() {
    const list = loadHistory();
    el.history.length = 1;
    for (const q of list) {
      const option = document.createElement('option');
      option.value = q;
      option.textContent = q.length > 120 ? q.slice(0, 117) + '…' : q;
      el.history.appendChild(option);
    }
    el.history.disabled = list.length === 0;
  }

  // ---------------------------------------------------------------- form state and URL

  function mode() {
    return el.form.querySelector('input[name=mode]:checked').value;
  }

  function setMode(value) {
    for (const input of el.form.querySelectorAll('input[name=mode]')) input.checked = input.value === value;
    document.body.classList.toggle('instant', value === 'instant');
    el.endLabel.textContent = value === 'instant' ? 'Time' : 'End';
  }

  let tab = 'graph';
  function setTab(value) {
    tab = value;
    for (const button of document.querySelectorAll('.tabs [data-tab]')) {
      button.setAttribute('aria-selected', String(button.dataset.tab === value));
    }
    $('view-graph').hidden = value !== 'graph';
    $('view-table').hidden = value !== 'table';
    if (value === 'graph' && lastMatrix) resizePlot();
  }

  // The step in seconds for a range query: the field, or range / 250 (at least 1 s).
  function stepSeconds(rangeSeconds) {
    const custom = parseDuration(el.step.value);
    if (custom) return custom;
    return Math.max(Math.floor(rangeSeconds / AUTO_POINTS), 1);
  }

  function updateUrl() {
    const params = new URLSearchParams();
    params.set('q', exprText());
    params.set('mode', mode());
    if (mode() === 'range') {
      params.set('range', el.range.value);
      if (el.step.value) params.set('step', el.step.value);
    }
    if (el.end.value) params.set('end', String(Math.round(endSeconds())));
    if (tab !== 'graph') params.set('tab', tab);
    history.replaceState(null, '', '?' + params.toString());
  }

  // ---------------------------------------------------------------- running a query

  function setStatus(target, state, text) {
    target.dataset.state = state;
    target.textContent = text;
  }

  function setNotes(items) {
    el.notes.replaceChildren();
    for (const [kind, text] of items) {
      const li = document.createElement('li');
      li.className = kind;
      li.textContent = text;
      el.notes.appendChild(li);
    }
  }

  async function postForm(path, fields, signal) {
    const response = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
      signal,
    });
    const text = await response.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new Error(`HTTP ${response.status}: ${text.slice(0, 300)}`);
    }
    return { json, bytes: text.length };
  }

  async function runQuery() {
    const expr = exprText().trim();
    if (!expr) {
      setStatus(el.status, 'idle', 'Enter a PromQL expression.');
      return;
    }
    el.examples.hidden = true;
    saveHistory(expr);
    updateUrl();

    const query = { query: expr, stats: '1' };
    let path;
    let range = null;
    const end = endSeconds();
    if (mode() === 'range') {
      const rangeSeconds = parseDuration(el.range.value);
      if (!rangeSeconds) {
        setStatus(el.status, 'error', `Range "${el.range.value}" is not a duration (e.g. 1h, 30m, 2d).`);
        return;
      }
      const step = stepSeconds(rangeSeconds);
      const start = end - rangeSeconds;
      range = { start, end, step };
      Object.assign(query, { start: String(start), end: String(end), step: String(step) });
      el.step.placeholder = `auto (${formatDuration(step)})`;
      path = 'api/v1/query_range';
    } else {
      query.time = String(end);
      path = 'api/v1/query';
    }

    if (inFlight) inFlight.abort();
    inFlight = new AbortController();
    const mine = ++generation;
    setStatus(el.status, 'loading', 'Running…');
    const started = performance.now();
    let answer;
    try {
      answer = await postForm(path, query, inFlight.signal);
    } catch (e) {
      if (mine !== generation) return;
      setStatus(el.status, 'error', e.name === 'AbortError' ? 'Cancelled.' : `Request failed: ${e.message}`);
      clearResult();
      return;
    }
    if (mine !== generation) return;
    const elapsed = performance.now() - started;
    const { json, bytes } = answer;
    if (json.status !== 'success') {
      setStatus(el.status, 'error', `${json.errorType || 'error'}: ${json.error || 'unknown error'}`);
      setNotes((json.warnings || []).map((w) => ['warning', w]));
      clearResult();
      return;
    }
    setNotes([
      ...(json.warnings || []).map((w) => ['warning', w]),
      ...(json.infos || []).map((i) => ['info', i]),
    ]);
    const summary = render(json.data, range);
    setStatus(el.status, 'done', `${summary} · ${Math.round(elapsed)} ms in the browser`);
    renderStats(json.data.stats, { elapsed, bytes });
  }

  function clearResult() {
    if (plot) {
      plot.destroy();
      plot = null;
    }
    lastMatrix = null;
    el.graph.dataset.series = '0';
    el.graph.dataset.points = '0';
    delete el.graph.dataset.drawn;
    el.graphEmpty.textContent = '';
    el.table.tHead.replaceChildren();
    el.table.tBodies[0].replaceChildren();
    el.table.dataset.rows = '0';
    el.summary.textContent = '';
    el.stats.replaceChildren();
  }

  // Draws the graph and fills the table; answers a one-line summary.
  function render(data, range) {
    clearResult();
    const type = data.resultType;
    const result = data.result;
    let summary;
    if (type === 'matrix') {
      const points = result.reduce((n, s) => n + floats(s).length + histograms(s).length, 0);
      summary = `${result.length} series, ${points} points`;
      renderMatrixTable(result);
      if (range) {
        lastMatrix = { result, range };
        drawPlot();
      }
    } else if (type === 'vector') {
      summary = `${result.length} series`;
      renderVectorTable(result);
      el.graphEmpty.textContent = 'An instant query has one value per series: see the table, or switch to Range for a graph.';
    } else {
      summary = type;
      renderScalarTable(type, result);
      el.graphEmpty.textContent = 'A scalar or string has no graph: see the table.';
    }
    if (result.length === 0 && (type === 'matrix' || type === 'vector')) {
      el.graphEmpty.textContent = 'No data: the expression selected no series in this time range.';
    }
    el.summary.textContent = summary;
    return summary;
  }

  // ---------------------------------------------------------------- graph

  function drawPlot() {
    const { result, range } = lastMatrix;
    if (plot) {
      plot.destroy();
      plot = null;
    }
    if (result.length === 0) return;
    const plotted = result.slice(0, SERIES_PLOTTED_MAX);
    const n = Math.floor((range.end - range.start) / range.step + 1e-9) + 1;
    const xs = new Array(n);
    for (let i = 0; i < n; i++) xs[i] = range.start + i * range.step;
    let points = 0;
    const columns = plotted.map((s) => {
      const ys = new Array(n).fill(null);
      // Native histograms have no one value to plot; the table shows them.
      for (const [t, v] of floats(s)) {
        const i = Math.round((t - range.start) / range.step);
        const value = parseSampleValue(v);
        if (i >= 0 && i < n && Number.isFinite(value)) {
          ys[i] = value;
          points++;
        }
      }
      return ys;
    });
    if (result.length > SERIES_PLOTTED_MAX) {
      el.graphEmpty.textContent = `The graph shows the first ${SERIES_PLOTTED_MAX} of ${result.length} series; the table lists them all.`;
    }
    el.graph.dataset.series = String(plotted.length);
    el.graph.dataset.points = String(points);

    let drawnSeries = 0;
    const options = {
      width: Math.max(el.graph.clientWidth, 300),
      height: 360,
      scales: { x: { time: true } },
      series: [
        { label: 'time' },
        ...plotted.map((s, i) => ({
          label: seriesName(s.metric),
          stroke: seriesColor(i),
          width: 1.5,
          points: { show: false },
          value: (u, v) => (v == null ? '' : String(v)),
        })),
      ],
      axes: [
        { stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' } },
        {
          stroke: '#555',
          size: 64,
          grid: { stroke: '#eee' },
          ticks: { stroke: '#ddd' },
          values: (u, values) => values.map(formatAxisValue),
        },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      hooks: {
        drawSeries: [() => { drawnSeries++; }],
        draw: [() => {
          el.graph.dataset.drawn = String(drawnSeries);
          drawnSeries = 0;
        }],
      },
    };
    plot = new uPlot(options, [xs, ...columns], el.graph);
  }

  function resizePlot() {
    if (!plot) {
      if (lastMatrix) drawPlot();
      return;
    }
    plot.setSize({ width: Math.max(el.graph.clientWidth, 300), height: 360 });
  }

  // ---------------------------------------------------------------- tables

  function cell(row, text, className) {
    const td = document.createElement('td');
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function header(columns) {
    const tr = document.createElement('tr');
    for (const c of columns) {
      const th = document.createElement('th');
      th.textContent = c;
      tr.appendChild(th);
    }
    el.table.tHead.replaceChildren(tr);
  }

  function finishTable(rows, total) {
    const body = el.table.tBodies[0];
    body.replaceChildren(...rows);
    el.table.dataset.rows = String(rows.length);
    if (total > rows.length) {
      const tr = document.createElement('tr');
      const td = cell(tr, `… ${total - rows.length} more series not shown`, 'muted');
      td.colSpan = 5;
      body.appendChild(tr);
    }
  }

  // A matrix series' float and native histogram points; Prometheus leaves out an empty key.
  function floats(s) {
    return s.values || [];
  }

  function histograms(s) {
    return s.histograms || [];
  }

  // A native histogram in one table cell: its count and sum.
  function histogramText(h) {
    return `histogram: count ${h.count}, sum ${h.sum}`;
  }

  function renderVectorTable(result) {
    header(['Series', 'Value', 'Time']);
    const rows = result.slice(0, TABLE_ROWS_MAX).map((s) => {
      const tr = document.createElement('tr');
      tr.className = 'series';
      cell(tr, seriesName(s.metric), 'labels');
      const [t, v] = s.value || s.histogram;
      cell(tr, s.value ? v : histogramText(v), 'num');
      cell(tr, formatTime(t), 'time');
      return tr;
    });
    finishTable(rows, result.length);
  }

  function renderMatrixTable(result) {
    header(['Series', 'Points', 'Latest', 'Min', 'Max']);
    const rows = result.slice(0, TABLE_ROWS_MAX).map((s) => {
      const values = floats(s).map(([, v]) => parseSampleValue(v)).filter((v) => !Number.isNaN(v));
      const lastFloat = floats(s)[floats(s).length - 1];
      const lastHist = histograms(s)[histograms(s).length - 1];
      const last = lastHist && (!lastFloat || lastHist[0] > lastFloat[0])
        ? [lastHist[0], histogramText(lastHist[1])]
        : lastFloat;
      const tr = document.createElement('tr');
      tr.className = 'series';
      cell(tr, seriesName(s.metric), 'labels');
      cell(tr, String(floats(s).length + histograms(s).length), 'num');
      cell(tr, last ? `${last[1]} @ ${formatTime(last[0])}` : '', 'num');
      cell(tr, values.length ? String(Math.min(...values)) : '', 'num');
      cell(tr, values.length ? String(Math.max(...values)) : '', 'num');
      return tr;
    });
    finishTable(rows, result.length);
  }

  function renderScalarTable(type, result) {
    header(['Type', 'Value', 'Time']);
    const tr = document.createElement('tr');
    tr.className = 'series';
    cell(tr, type, 'labels');
    cell(tr, String(result[1]), 'num');
    cell(tr, formatTime(result[0]), 'time');
    finishTable([tr], 1);
  }

  // ---------------------------------------------------------------- stats

  const STAT_NAMES = {
    'timings.execTotalTime': 'Execution total',
    'timings.execQueueTime': 'Waiting for a query slot',
    'timings.queryPreparationTime': 'Preparation',
    'timings.innerEvalTime': 'Evaluation',
    'timings.evalTotalTime': 'Preparation + evaluation',
    'timings.resultSortTime': 'Sorting',
    'timings.strataSelectTime': 'Selecting series',
    'timings.strataReadTime': 'Reading samples (thread time, all threads)',
    'timings.strataEncodeTime': 'Encoding the answer',
    'samples.totalQueryableSamples': 'Samples read',
    'samples.peakSamples': 'Peak samples in memory',
    'samples.seriesMatched': 'Series matched',
    'samples.blocksFromStats': 'Blocks answered from statistics',
    'samples.blocksDecoded': 'Blocks decoded',
    'samples.samplesDecoded': 'Samples decoded',
  };

  // Every member of data.stats, the known ones named in words (strata's phase timings and
  // explain counters among them: selecting, reading, encoding; blocks answered from their
  // statistics, blocks and samples decoded); members added later show under their JSON path.
  function renderStats(stats, client) {
    const entries = [];
    const walk = (prefix, value) => {
      if (value && typeof value === 'object' && !Array.isArray(value)) {
        for (const [k, v] of Object.entries(value)) walk(prefix ? `${prefix}.${k}` : k, v);
      } else if (!Array.isArray(value)) {
        entries.push([prefix, value]);
      }
    };
    walk('', stats || {});
    const rows = entries.map(([path, value]) => {
      const isTime = path.startsWith('timings.') && typeof value === 'number';
      const shown = isTime ? `${(value * 1000).toFixed(3)} ms` : Number(value).toLocaleString('en-US');
      return [STAT_NAMES[path] || path, shown, path];
    });
    rows.push(['Round trip in the browser', `${client.elapsed.toFixed(1)} ms`, 'client.elapsed']);
    rows.push(['Response size', `${client.bytes.toLocaleString('en-US')} bytes`, 'client.bytes']);
    el.stats.replaceChildren();
    for (const [name, value, path] of rows) {
      const dt = document.createElement('dt');
      dt.textContent = name;
      dt.title = path;
      const dd = document.createElement('dd');
      dd.textContent = value;
      dd.dataset.stat = path;
      el.stats.append(dt, dd);
    }
  }

  // ---------------------------------------------------------------- cardinality page

  async function loadTsdb() {
    const status = $('tsdb-status');
    const limit = $('tsdb-limit').value;
    setStatus(status, 'loading', 'Loading…');
    let json;
    try {
      const response = await fetch(`api/v1/status/tsdb?limit=${encodeURIComponent(limit)}`);
      json = await response.json();
    } catch (e) {
      setStatus(status, 'error', `Request failed: ${e.message}`);
      return;
    }
    if (json.status !== 'success') {
      setStatus(status, 'error', `${json.errorType}: ${json.error}`);
      return;
    }
    const data = json.data;
    const head = data.headStats || {};
    const stats = $('head-stats');
    stats.replaceChildren();
    const put = (name, value) => {
      const dt = document.createElement('dt');
      dt.textContent = name;
      const dd = document.createElement('dd');
      dd.textContent = value;
      stats.append(dt, dd);
    };
    const asTime = (ms) => (Number.isFinite(ms) && ms > -9e15 && ms < 9e15 ? formatTime(ms / 1000) : '–');
    put('Series', Number(head.numSeries || 0).toLocaleString('en-US'));
    put('Label pairs', Number(head.numLabelPairs || 0).toLocaleString('en-US'));
    put('Head chunks', Number(head.chunkCount || 0).toLocaleString('en-US'));
    put('Oldest sample', asTime(head.minTime));
    put('Newest sample', asTime(head.maxTime));
    stats.dataset.series = String(head.numSeries || 0);

    const queryLink = (expr) => `./?q=${encodeURIComponent(expr)}&mode=instant`;
    fillTsdbTable('tsdb-metrics', data.seriesCountByMetricName, 'series',
      (name) => queryLink(`count by (__name__) ({__name__=${JSON.stringify(name)}})`));
    fillTsdbTable('tsdb-pairs', data.seriesCountByLabelValuePair, 'series', (pair) => {
      const at = pair.indexOf('=');
      if (at <= 0) return null;
      return queryLink(`count({${pair.slice(0, at)}=${JSON.stringify(pair.slice(at + 1))}})`);
    });
    fillTsdbTable('tsdb-values', data.labelValueCountByLabelName, 'values', (name) => (
      /^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name) ? queryLink(`count by (${name}) ({${name}!=""})`) : null));
    fillTsdbTable('tsdb-memory', data.memoryInBytesByLabelName, 'bytes', () => null);
    setStatus(status, 'done', `${Number(head.numSeries || 0).toLocaleString('en-US')} series`);
  }

  function fillTsdbTable(id, entries, unit, linkFor) {
    const table = $(id);
    const list = Array.isArray(entries) ? entries : [];
    const max = list.reduce((m, e) => Math.max(m, Number(e.value) || 0), 0) || 1;
    const rows = list.map((entry) => {
      const tr = document.createElement('tr');
      const name = document.createElement('td');
      name.className = 'labels';
      const href = linkFor(entry.name);
      if (href) {
        const a = document.createElement('a');
        a.href = href;
        a.textContent = entry.name;
        name.appendChild(a);
      } else {
        name.textContent = entry.name;
      }
      tr.appendChild(name);
      const value = document.createElement('td');
      value.className = 'num';
      value.textContent = `${Number(entry.value).toLocaleString('en-US')} ${unit}`;
      tr.appendChild(value);
      const barCell = document.createElement('td');
      barCell.className = 'bar-cell';
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.style.width = `${((Number(entry.value) || 0) / max) * 100}%`;
      barCell.appendChild(bar);
      tr.appendChild(barCell);
      return tr;
    });
    table.tBodies[0].replaceChildren(...rows);
    table.dataset.rows = String(rows.length);
  }

  // ---------------------------------------------------------------- wiring

  function showPage(page) {
    $('page-query').hidden = page !== 'query';
    $('page-tsdb').hidden = page !== 'tsdb';
    $('nav-query').classList.toggle('active', page === 'query');
    $('nav-tsdb').classList.toggle('active', page === 'tsdb');
    document.title = page === 'tsdb' ? 'strata · cardinality' : 'strata';
  }

  function shiftRange(direction) {
    const rangeSeconds = parseDuration(el.range.value);
    if (!rangeSeconds) return;
    el.end.value = toLocalInput(endSeconds() + (direction * rangeSeconds) / 2);
    runQuery();
  }

  async function formatExpr() {
    const expr = exprText().trim();
    if (!expr) return;
    try {
      const { json } = await postForm('api/v1/format_query', { query: expr });
      if (json.status === 'success') {
        editor.setValue(json.data);
      } else {
        setStatus(el.status, 'error', `${json.errorType}: ${json.error}`);
      }
    } catch (e) {
      setStatus(el.status, 'error', `Request failed: ${e.message}`);
    }
  }

  function init() {
    const params = new URLSearchParams(location.search);
    renderHistory();
    el.form.addEventListener('submit', (e) => {
      e.preventDefault();
      runQuery();
    });
    for (const input of el.form.querySelectorAll('input[name=mode]')) {
      input.addEventListener('change', () => {
        setMode(mode());
        setTab(mode() === 'instant' ? 'table' : 'graph');
        if (exprText().trim()) runQuery();
      });
    }
    el.range.addEventListener('change', () => exprText().trim() && runQuery());
    el.step.addEventListener('change', () => exprText().trim() && runQuery());
    el.end.addEventListener('change', () => exprText().trim() && runQuery());
    $('now').addEventListener('click', () => {
      el.end.value = '';
      if (exprText().trim()) runQuery();
    });
    $('earlier').addEventListener('click', () => shiftRange(-1));
    $('later').addEventListener('click', () => shiftRange(1));
    $('format').addEventListener('click', formatExpr);
    el.history.addEventListener('change', () => {
      if (!el.history.value) return;
      editor.setValue(el.history.value);
      el.history.selectedIndex = 0;
      runQuery();
    });
    $('clear-history').addEventListener('click', () => {
      try {
        localStorage.removeItem(HISTORY_KEY);
      } catch (e) {
        // Nothing to clear.
      }
      renderHistory();
    });
    for (const button of document.querySelectorAll('.tabs [data-tab]')) {
      button.addEventListener('click', () => {
        setTab(button.dataset.tab);
        if (exprText().trim()) updateUrl();
      });
    }
    $('tsdb-refresh').addEventListener('click', loadTsdb);
    $('tsdb-limit').addEventListener('change', loadTsdb);
    let resizeTimer = null;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(resizePlot, 100);
    });

    fetch('api/v1/status/buildinfo')
      .then((r) => r.json())
      .then((j) => {
        if (j.status === 'success') $('version').textContent = `strata ${String(j.data.revision).replace(/^strata-/, '')}`;
      })
      .catch(() => {});

    if (params.get('page') === 'tsdb') {
      showPage('tsdb');
      const limit = params.get('limit');
      if (limit) $('tsdb-limit').value = limit;
      loadTsdb();
      return;
    }
    showPage('query');
    const m = params.get('mode') === 'instant' ? 'instant' : 'range';
    setMode(m);
    const wantedTab = params.get('tab') || (m === 'instant' ? 'table' : 'graph');
    setTab(wantedTab === 'table' ? 'table' : 'graph');
    if (params.get('range')) el.range.value = params.get('range');
    if (params.get('step')) el.step.value = params.get('step');
    const end = parseEndParam(params.get('end'));
    if (end !== null) el.end.value = toLocalInput(end);
    const q = params.get('q');
    if (q) {
      editor.setValue(q);
      runQuery();
    } else {
      setStatus(el.status, 'idle', 'Enter a PromQL expression and press Enter.');
      editor.focus();
    }
  }

  init();
})();
