// The results viewer: jobs, their main metrics, a progress/throughput chart and per-instance predictions.
// Plain browser JavaScript served as is (no build step); every value from the server is inserted as text.

const $ = (selector) => document.querySelector(selector);
const keyInput = $('#api-key');
const fromFragment = new URLSearchParams(location.hash.slice(1)).get('key');
if (fromFragment) localStorage.setItem('flexhelm-api-key', fromFragment);
keyInput.value = localStorage.getItem('flexhelm-api-key') ?? '';
keyInput.addEventListener('change', () => {
  localStorage.setItem('flexhelm-api-key', keyInput.value);
  void refresh(); // refresh shows its own errors
});

const state = { jobs: [], selected: null, predictions: [], predictionsFor: null };

async function api(path, init = {}) {
  const headers = { ...(init.headers ?? {}) };
  if (keyInput.value) headers.authorization = `Bearer ${keyInput.value}`;
  const res = await fetch(path, { ...init, headers });
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message ?? `${res.status} ${res.statusText}`);
  return body;
}

function showError(message) {
  const el = $('#error');
  el.hidden = !message;
  el.textContent = message ?? '';
}

function cell(row, content, className) {
  const td = document.createElement('td');
  if (content instanceof Node) td.append(content);
  else td.textContent = content ?? '';
  if (className) td.className = className;
  row.append(td);
  return td;
}

function pre(text) {
  const p = document.createElement('pre');
  p.textContent = text;
  return p;
}

function progressBar(fraction) {
  const bar = document.createElement('span');
  bar.className = 'bar';
  const fill = document.createElement('span');
  fill.style.width = `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%`;
  bar.append(fill);
  return bar;
}

function jobFraction(job) {
  const p = job.progress;
  if (job.status === 'succeeded') return 1;
  if (!p.runCount) return 0;
  return (p.runIndex + (p.total ? p.done / p.total : 0)) / p.runCount;
}

function renderJobs() {
  const body = $('#jobs tbody');
  body.replaceChildren();
  for (const job of state.jobs) {
    const tr = document.createElement('tr');
    tr.dataset.id = job.id;
    if (job.id === state.selected) tr.className = 'selected';
    cell(tr, job.id);
    cell(tr, job.status, `status-${job.status}`);
    cell(tr, new Date(job.createdAt).toLocaleString());
    cell(tr, job.runs.map((r) => r.name).join('\n'));
    const p = job.progress;
    const progress = document.createElement('span');
    progress.append(progressBar(jobFraction(job)), ` run ${Math.min(p.runIndex + 1, p.runCount)}/${p.runCount}, ${p.done}/${p.total} requests`);
    cell(tr, progress);
    const actions = cell(tr, '');
    if (job.status === 'queued' || job.status === 'running') {
      const cancel = document.createElement('button');
      cancel.textContent = 'Cancel';
      cancel.addEventListener('click', async (event) => {
        event.stopPropagation();
        try {
          await api(`/v1/runs/${job.id}`, { method: 'DELETE' });
          await refresh();
        } catch (err) {
          showError(err.message);
        }
      });
      actions.append(cancel);
    }
    tr.addEventListener('click', () => selectJob(job.id));
    body.append(tr);
  }
}

function renderMetrics(job) {
  const body = $('#metrics tbody');
  body.replaceChildren();
  for (const run of job.runs) {
    for (const [i, m] of (run.metrics ?? []).entries()) {
      const tr = document.createElement('tr');
      cell(tr, i === 0 ? run.name : '');
      cell(tr, m.name);
      cell(tr, m.split);
      cell(tr, m.perturbation);
      cell(tr, Number.isInteger(m.mean) ? String(m.mean) : m.mean.toFixed(4), 'num');
      cell(tr, String(m.count), 'num');
      body.append(tr);
    }
  }
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** Requests done over time (line) and generated tokens per second between samples (bars), as inline SVG. */
function renderChart(job) {
  const box = $('#chart');
  box.replaceChildren();
  const samples = job.samples ?? [];
  if (samples.length < 2) {
    box.textContent = 'no progress samples yet';
    return;
  }
  const W = 520, H = 220, L = 48, R = 48, T = 12, B = 30;
  const tMax = Math.max(...samples.map((s) => s.t), 1e-3);
  const doneMax = Math.max(...samples.map((s) => s.done), 1);
  // Records from before resumed jobs kept their counts can dip at a restart: a dip is no negative throughput.
  const rates = samples.slice(1).map((s, i) => {
    const dt = s.t - samples[i].t;
    return { t: s.t, rate: dt > 0 ? Math.max(0, (s.generatedTokens - samples[i].generatedTokens) / dt) : 0 };
  });
  const rateMax = Math.max(...rates.map((r) => r.rate), 1);
  const x = (t) => L + (t / tMax) * (W - L - R);
  const yDone = (d) => H - B - (d / doneMax) * (H - T - B);
  const yRate = (r) => H - B - (r / rateMax) * (H - T - B);
  const chart = svg('svg', { width: '100%', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'progress and throughput' });
  chart.append(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B, fill: '#fff', stroke: '#dde2e8' }));
  for (const r of rates) chart.append(svg('rect', { class: 'rate', x: x(r.t) - 2, y: yRate(r.rate), width: 4, height: Math.max(0, H - B - yRate(r.rate)), fill: '#f2b36b' }));
  const points = samples.map((s) => `${x(s.t).toFixed(1)},${yDone(s.done).toFixed(1)}`).join(' ');
  chart.append(svg('polyline', { class: 'done', points, fill: 'none', stroke: '#1f6feb', 'stroke-width': 2 }));
  chart.append(svg('text', { x: L - 4, y: T + 10, 'text-anchor': 'end' }, String(doneMax)));
  chart.append(svg('text', { x: L - 4, y: H - B, 'text-anchor': 'end' }, '0'));
  chart.append(svg('text', { x: W - R + 4, y: T + 10 }, `${rateMax.toFixed(0)}`));
  chart.append(svg('text', { x: W - R, y: H - 8, 'text-anchor': 'end' }, `${tMax.toFixed(1)} s`));
  chart.append(svg('text', { x: L, y: H - 8 }, 'requests done (line), tokens/s (bars)'));
  box.append(chart);
}

function renderRunSelect(job) {
  const select = $('#run-select');
  const previous = select.value;
  select.replaceChildren();
  job.runs.forEach((run, i) => {
    const option = document.createElement('option');
    option.value = String(i);
    option.textContent = `${run.name} (${run.status})`;
    option.disabled = !run.runDir;
    select.append(option);
  });
  const firstReady = job.runs.findIndex((r) => r.runDir);
  select.value = previous && job.runs[Number(previous)]?.runDir ? previous : String(Math.max(0, firstReady));
}

function renderPredictions() {
  const text = $('#filter-text').value.trim().toLowerCase();
  const correctness = $('#filter-correct').value;
  const split = $('#filter-split').value;
  const rows = state.predictions.filter((p) => {
    if (split && p.split !== split) return false;
    if (correctness === 'correct' && p.correct !== true) return false;
    if (correctness === 'incorrect' && p.correct !== false) return false;
    if (!text) return true;
    return [p.prompt, p.completion, ...p.references.map((r) => r.text)].some((s) => s.toLowerCase().includes(text));
  });
  const body = $('#predictions tbody');
  body.replaceChildren();
  for (const p of rows) {
    const tr = document.createElement('tr');
    cell(tr, `${p.instanceId}${p.perturbation ? ` (${p.perturbation})` : ''}${p.trial ? ` trial ${p.trial}` : ''}`);
    cell(tr, p.split);
    cell(tr, pre(p.prompt));
    cell(tr, pre(p.completion));
    const refs = document.createElement('div');
    for (const r of p.references) {
      const line = pre(`${r.correct ? '✓ ' : '  '}${r.text}`);
      if (r.correct) line.className = 'ok';
      refs.append(line);
    }
    cell(tr, refs);
    cell(tr, p.correct === null ? '–' : p.correct ? 'correct' : 'incorrect', p.correct === null ? '' : p.correct ? 'ok' : 'bad');
    body.append(tr);
  }
  $('#prediction-count').textContent = `${rows.length} of ${state.predictions.length} requests`;
}

async function loadPredictions(job) {
  const index = $('#run-select').value;
  const run = job.runs[Number(index)];
  const key = `${job.id}/${index}`;
  if (!run?.runDir) {
    state.predictions = [];
    state.predictionsFor = null;
    renderPredictions();
    return;
  }
  if (state.predictionsFor === key) return;
  const body = await api(`/v1/runs/${job.id}/predictions?run=${index}`);
  state.predictions = body.data;
  state.predictionsFor = key;
  const splitSelect = $('#filter-split');
  const chosen = splitSelect.value;
  splitSelect.replaceChildren(new Option('all', ''));
  for (const s of [...new Set(body.data.map((p) => p.split))].sort()) splitSelect.append(new Option(s, s));
  splitSelect.value = [...splitSelect.options].some((o) => o.value === chosen) ? chosen : '';
  renderPredictions();
}

async function selectJob(id) {
  state.selected = id;
  const job = state.jobs.find((j) => j.id === id);
  if (!job) return;
  $('#job-detail').hidden = false;
  $('#job-title').textContent = `${job.id} (${job.status})`;
  const jobError = $('#job-error');
  jobError.hidden = !job.error;
  jobError.textContent = job.error ?? '';
  renderJobs();
  renderMetrics(job);
  renderChart(job);
  renderRunSelect(job);
  await loadPredictions(job);
}

async function refresh() {
  try {
    const [models, jobs] = await Promise.all([api('/v1/models'), api('/v1/runs')]);
    $('#model').textContent = models.data.map((m) => m.id).join(', ');
    state.jobs = jobs.data;
    if (!state.selected && state.jobs.length) state.selected = (state.jobs.find((j) => j.status === 'succeeded') ?? state.jobs[0]).id;
    renderJobs();
    if (state.selected) await selectJob(state.selected);
    showError(null);
    document.body.dataset.loaded = 'true';
  } catch (err) {
    showError(err.message);
  }
}

$('#run-select').addEventListener('change', () => {
  const job = state.jobs.find((j) => j.id === state.selected);
  if (job) loadPredictions(job).catch((err) => showError(err.message));
});
for (const id of ['#filter-text', '#filter-correct', '#filter-split']) $(id).addEventListener('input', renderPredictions);
$('#new-job').addEventListener('submit', async (event) => {
  event.preventDefault();
  const descriptions = $('#new-descriptions').value.split(/[;\n]/).map((d) => d.trim()).filter(Boolean);
  const request = { descriptions };
  if ($('#new-max').value) request.max_eval_instances = Number($('#new-max').value);
  if ($('#new-suite').value.trim()) request.suite = $('#new-suite').value.trim();
  try {
    const job = await api('/v1/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
    state.selected = job.id;
    await refresh();
  } catch (err) {
    showError(err.message);
  }
});

await refresh();
// Poll fast while a job is unfinished, slowly otherwise (to see jobs submitted elsewhere), never when hidden.
let lastRefresh = Date.now();
setInterval(() => {
  const busy = state.jobs.some((j) => j.status === 'queued' || j.status === 'running');
  if (document.visibilityState !== 'visible' || Date.now() - lastRefresh < (busy ? 1500 : 10_000)) return;
  lastRefresh = Date.now();
  void refresh(); // refresh shows its own errors
}, 500);
