// The results site: leaderboards, runs, instances and comparisons of finished HELM suites, read from /v1/results.
// Plain browser JavaScript served as is (no build step). Model outputs and file contents are hostile: every value is
// inserted as text (createTextNode / textContent), never as HTML, and links are built from encoded names only. The one
// exception is a group's description, Markdown from HELM's schema: rendered by marked, then cut down by DOMPurify to an
// allow-list of tags and attributes (no scripts, handlers, styles or non-http links) before it reaches the page.

const KEY = 'flexhelm-api-key';
const keyInput = document.getElementById('api-key');
const page = document.getElementById('page');
const fragmentKey = new URLSearchParams(location.hash.slice(1)).get('key');
if (fragmentKey) {
  localStorage.setItem(KEY, fragmentKey);
  location.hash = '#/';
}
keyInput.value = localStorage.getItem(KEY) ?? '';
keyInput.addEventListener('change', () => {
  localStorage.setItem(KEY, keyInput.value);
  void render();
});

const SVG = 'http://www.w3.org/2000/svg';
const PAGE_SIZES = [10, 25, 50, 100];

/** `el('td', { class: 'x' }, 'text', node, …)`: attributes set as attributes, children strings become text nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? '' : String(v));
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** `#/s/<suite>/r/<run>?page=2` from parts; every part encoded. */
function href(parts, query) {
  const q = query ? `?${new URLSearchParams(query)}` : '';
  return `#/${parts.map((p) => encodeURIComponent(p)).join('/')}${q}`;
}

async function api(path) {
  const headers = keyInput.value ? { authorization: `Bearer ${keyInput.value}` } : {};
  const res = await fetch(`/v1/results/${path}`, { headers });
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${res.status} ${res.statusText}: the server's answer is not JSON`);
  }
  if (!res.ok) throw new Error(body?.error?.message ?? `${res.status} ${res.statusText}`);
  return body;
}

const enc = encodeURIComponent;

function num(value, digits = 3) {
  if (value === null || value === undefined) return '';
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value)) return String(value);
  if (Math.abs(value) < 1e-3) return value.toExponential(2); // tiny probabilities would all read 0.000
  return Math.abs(value) >= 1000 ? value.toFixed(1) : value.toFixed(digits);
}

function crumbs(items) {
  const nav = document.getElementById('crumbs');
  nav.replaceChildren(...items.flatMap(([text, link], i) => [i ? el('span', { class: 'sep' }, '›') : null, link ? el('a', { href: link }, text) : el('span', {}, text)]).filter(Boolean));
}

/** Pagination bar for a server-side page: prev/next, "page X of Y", and a page-size choice. */
function pager(result, go) {
  const bar = el('div', { class: 'pager' });
  const prev = el('button', { type: 'button', class: 'prev', disabled: result.page <= 1 }, '‹ previous');
  const next = el('button', { type: 'button', class: 'next', disabled: result.page >= result.pages }, 'next ›');
  prev.addEventListener('click', () => go(result.page - 1, result.size));
  next.addEventListener('click', () => go(result.page + 1, result.size));
  const size = el('select', { class: 'page-size', 'aria-label': 'rows per page' }, PAGE_SIZES.map((n) => el('option', { value: n, selected: n === result.size }, `${n} per page`)));
  size.addEventListener('change', () => go(1, Number(size.value)));
  bar.append(prev, el('span', { class: 'page-of' }, `page ${result.page} of ${result.pages} · ${result.total} instances`), next, size);
  return bar;
}

// --- pages -----------------------------------------------------------------------------------------------------

async function suitesPage() {
  const { data } = await api('suites');
  crumbs([['suites']]);
  if (data.length === 1) {
    location.replace(href(['s', data[0]]));
    return;
  }
  page.replaceChildren(el('h1', {}, 'Suites'), data.length ? el('ul', { class: 'suites' }, data.map((s) => el('li', {}, el('a', { href: href(['s', s]) }, s)))) : el('p', {}, 'No suites yet: run flexhelm run --suite S …, then flexhelm summarize --suite S.'));
}

async function suitePage(suite) {
  const data = await api(`suites/${enc(suite)}`);
  crumbs([['suites', '#/'], [suite]]);
  const models = [...new Set(data.runs.map((r) => r.model))];
  if (!data.summarized) {
    // Run folders only: say what is there and the one command that makes the leaderboards.
    const finished = data.runs.filter((r) => r.finished).length;
    page.replaceChildren(
      el('h1', {}, `Suite ${suite}`),
      el('div', { class: 'notice', id: 'not-summarized' },
        el('p', {}, el('strong', {}, 'Not summarized yet. '), `${data.runs.length} run folder${data.runs.length === 1 ? '' : 's'} (${finished} finished); leaderboards, instances and comparisons appear once you run`),
        el('pre', { class: 'command' }, data.command),
        el('p', { class: 'muted' }, 'with the same --output-path as the runs, then reload this page.')),
      el('section', {}, el('h2', {}, 'Runs'), runsTable(suite, data.runs, models, false)),
    );
    return;
  }
  const groupLinks = [];
  for (const table of data.groups) {
    const rows = (table.rows ?? []).map((row) => {
      const name = new URLSearchParams(String(row[0]?.href ?? '').replace(/^\?/, '')).get('group');
      const label = String(row[0]?.value ?? name);
      const count = row.at(-1)?.value;
      return el('tr', {}, el('td', {}, name ? el('a', { href: href(['s', suite, 'g', name]) }, label) : label), el('td', { class: 'num' }, num(row[3]?.value, 1)), el('td', { class: 'num' }, num(count)));
    });
    if (rows.length) groupLinks.push(el('h3', {}, String(table.title ?? '')), el('table', { class: 'groups' }, el('thead', {}, el('tr', {}, el('th', {}, 'scenario group'), el('th', {}, '# instances'), el('th', {}, '# models'))), el('tbody', {}, rows)));
  }
  page.replaceChildren(
    el('h1', {}, `Suite ${suite}`),
    el('p', { class: 'muted' }, `${data.runs.length} runs · ${models.length} models${data.summary?.date ? ` · summarized ${data.summary.date}` : ''}`),
    el('section', {}, el('h2', {}, 'Leaderboards'), groupLinks.length ? groupLinks : el('p', {}, 'groups.json lists no groups with runs.')),
    el('section', {}, el('h2', {}, 'Runs'), runsTable(suite, data.runs, models, true)),
    costsTable(data.costs),
  );
}

/**
 * The suite's runs with the models side by side: one row per run description (its name without the model), one
 * column per model, and a link comparing the first two models that ran it.
 */
function runsTable(suite, runs, models, linked) {
  const rows = new Map();
  for (const r of runs) {
    if (!rows.has(r.key)) rows.set(r.key, { scenario: r.scenario, groups: r.groups, byModel: new Map() });
    rows.get(r.key).byModel.set(r.model, r);
  }
  const cell = (r) => {
    if (!r) return el('td', { class: 'nc' }, '—');
    const text = r.finished === false ? 'unfinished' : linked ? 'open' : 'finished';
    return el('td', { class: `run-cell${r.finished === false ? ' unfinished' : ''}`, title: r.name }, linked ? el('a', { href: href(['s', suite, 'r', r.name]) }, text) : text);
  };
  const compare = (byModel) => {
    const both = models.filter((m) => byModel.has(m));
    return both.length >= 2 ? el('a', { href: href(['s', suite, 'c', byModel.get(both[0]).name, byModel.get(both[1]).name]) }, `${both[0]} vs ${both[1]}`) : '';
  };
  return el('div', { class: 'scroll' }, el('table', { id: 'runs', class: 'runs' },
    el('thead', {}, el('tr', {}, el('th', {}, 'run'), models.map((m) => el('th', { class: 'model' }, m)), linked && models.length > 1 ? el('th', {}, 'compare') : '', el('th', {}, 'scenario'), el('th', {}, 'groups'))),
    el('tbody', {}, [...rows].map(([key, row]) => el('tr', {}, el('th', { scope: 'row' }, key), models.map((m) => cell(row.byModel.get(m))), linked && models.length > 1 ? el('td', {}, compare(row.byModel)) : '', el('td', {}, row.scenario ?? ''), el('td', { class: 'groups' }, row.groups.join(', ')))))));
}

function costsTable(costs) {
  const models = Object.keys(costs ?? {});
  if (!models.length) return '';
  const fields = [...new Set(models.flatMap((m) => Object.keys(costs[m] ?? {})))];
  return el(
    'section',
    {},
    el('h2', {}, 'Costs'),
    el('table', { class: 'costs' }, el('thead', {}, el('tr', {}, el('th', {}, 'model'), fields.map((f) => el('th', {}, f)))), el('tbody', {}, models.map((m) => el('tr', {}, el('td', {}, m), fields.map((f) => el('td', { class: 'num' }, num(costs[m][f], 1))))))),
  );
}

async function groupPage(suite, group) {
  const data = await api(`suites/${enc(suite)}/groups/${enc(group)}`);
  const title = data.metadata?.display_name ?? group;
  crumbs([['suites', '#/'], [suite, href(['s', suite])], [title]]);
  const tables = data.tables.map((t, i) => leaderboard(suite, t, i));
  page.replaceChildren(el('h1', {}, title), data.metadata?.description ? markdown(String(data.metadata.description)) : '', accuracyChart(data.tables), ...tables);
  for (const chart of page.querySelectorAll('svg.scatter')) placeLabels(chart);
}

let markdownParser;
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const MARKDOWN_TAGS = ['p', 'a', 'em', 'strong', 'code', 'pre', 'ul', 'ol', 'li', 'blockquote', 'br', 'hr', 'h3', 'h4', 'h5', 'h6', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'del'];

/**
 * HELM's Markdown (schema.yaml descriptions) as a node: marked renders it, with raw HTML in it shown as text (so the
 * browser never parses a hostile attribute, not even to have the CSP refuse it); DOMPurify then keeps the allow-listed
 * tags and only href/title attributes with http(s), mailto or in-page links. Without the two scripts, the text as is.
 */
function markdown(text) {
  const { marked, DOMPurify } = globalThis;
  if (!marked || !DOMPurify) return el('p', { class: 'description' }, text);
  markdownParser ??= new marked.Marked({ async: false, gfm: true, renderer: { html: ({ text: raw }) => escapeHtml(raw) } });
  const html = markdownParser.parse(text);
  const fragment = DOMPurify.sanitize(html, { ALLOWED_TAGS: MARKDOWN_TAGS, ALLOWED_ATTR: ['href', 'title'], ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i, RETURN_DOM_FRAGMENT: true });
  for (const a of fragment.querySelectorAll('a')) a.setAttribute('rel', 'noopener noreferrer');
  return el('div', { class: 'description markdown' }, fragment);
}

/**
 * A HELM table (`groups/<group>.json`): models as rows, sortable by any column, empty cells said to be not computed.
 * Columns without a single value (a parent group's table has one per subgroup and metric, most of them empty for a
 * suite that ran a few scenarios) are hidden until the toggle shows them.
 */
function leaderboard(suite, table, index) {
  const header = table.header ?? [];
  const empty = header.map((_, i) => i > 0 && (table.rows ?? []).every((r) => r[i]?.value === null || r[i]?.value === undefined));
  const emptyClass = (i) => (empty[i] ? ' empty' : '');
  const body = el('tbody');
  const rows = (table.rows ?? []).map((cells) => ({ cells, node: el('tr', {}, cells.map((c, i) => leaderboardCell(suite, c, i, emptyClass(i)))) }));
  body.append(...rows.map((r) => r.node));
  const ths = header.map((h, i) => {
    const direction = h.lower_is_better === true ? 'lower' : h.lower_is_better === false ? 'higher' : '';
    const th = el('th', { scope: 'col', title: h.description ?? '', 'data-col': i, class: `${direction}${emptyClass(i)}`.trim() || undefined }, String(h.value ?? ''), direction ? el('span', { class: 'dir' }, h.lower_is_better ? ' ↓' : ' ↑') : '');
    th.addEventListener('click', () => {
      const descending = th.getAttribute('aria-sort') !== 'descending';
      for (const other of ths) other.removeAttribute('aria-sort');
      th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
      rows.sort((a, b) => compareCells(a.cells[i]?.value, b.cells[i]?.value, descending));
      body.replaceChildren(...rows.map((r) => r.node));
    });
    return th;
  });
  const board = el('table', { class: 'board' }, el('thead', {}, el('tr', {}, ths)), body);
  const hidden = empty.filter(Boolean).length;
  let toggle = '';
  if (hidden) {
    const box = el('input', { type: 'checkbox', class: 'show-empty' });
    box.addEventListener('change', () => board.classList.toggle('show-empty', box.checked));
    toggle = el('label', { class: 'empty-toggle' }, box, ` show ${hidden} empty column${hidden === 1 ? '' : 's'} (no run of this suite has their metric)`);
  }
  // HELM's "compare all" link names the runs behind the table; with two of them it opens the comparison.
  const pair = (table.links ?? []).map((l) => runSpecsOf(l.href)).find((runs) => runs.length === 2);
  const compare = pair ? el('a', { class: 'compare-all', href: href(['s', suite, 'c', pair[0], pair[1]]) }, 'compare the two models instance by instance') : '';
  const allEmpty = header.length > 1 && hidden === header.length - 1;
  return el('section', { class: `leaderboard${allEmpty ? ' all-empty' : ''}`, id: `table-${index}` }, el('h2', {}, String(table.title ?? table.name ?? '')), table.description ? el('p', { class: 'muted' }, String(table.description)) : '', allEmpty ? el('p', { class: 'muted' }, 'No run of this suite has any of these metrics.') : '', toggle, el('div', { class: 'scroll' }, board), compare);
}

/** Sort order for cell values: numbers by value, text alphabetically, missing values always last. */
function compareCells(a, b, descending) {
  const missing = (v) => v === null || v === undefined;
  if (missing(a) || missing(b)) return missing(a) - missing(b);
  const order = typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b));
  return descending ? -order : order;
}

function leaderboardCell(suite, cell, column, extraClass) {
  const value = cell?.value;
  if (column === 0) {
    const runs = runSpecsOf(cell?.href);
    return el('th', { scope: 'row', title: cell?.description || '' }, runs.length === 1 ? el('a', { href: href(['s', suite, 'r', runs[0]]) }, String(value ?? '')) : String(value ?? ''));
  }
  if (value === null || value === undefined) return el('td', { class: `nc${extraClass}`, title: cell?.description || 'not computed' }, 'not computed');
  const bold = cell.style && cell.style['font-weight'] === 'bold';
  return el('td', { class: `num${bold ? ' best' : ''}`, title: cell.description || '' }, cell.display_value ?? num(value));
}

/** Run names in a HELM cell link (`?group=…&runSpecs=["…"]`). */
function runSpecsOf(link) {
  try {
    const specs = JSON.parse(new URLSearchParams(String(link ?? '').replace(/^\?/, '')).get('runSpecs') ?? '[]');
    return Array.isArray(specs) ? specs.filter((s) => typeof s === 'string') : [];
  } catch {
    return [];
  }
}

/**
 * Accuracy against inference time, one point per model: the first accuracy-like column (higher is better, not a
 * win rate) and the first inference-time column that hold numbers, from one table or (metric-group pages) two, by model.
 */
function accuracyChart(tables) {
  const find = (test) => {
    for (const table of tables) {
      const column = (table.header ?? []).findIndex((h, i) => i > 0 && test(h) && (table.rows ?? []).some((r) => typeof r[i]?.value === 'number'));
      if (column > 0) return { table, column, label: String(table.header[column].value) };
    }
    return null;
  };
  const y = find((h) => h.lower_is_better === false && !/win rate/i.test(String(h.value)));
  const x = find((h) => /inference (time|runtime)/i.test(`${h.value} ${h.metadata?.metric ?? ''}`));
  if (!x || !y) return '';
  const xs = new Map((x.table.rows ?? []).map((r) => [String(r[0]?.value), r[x.column]?.value]));
  const points = (y.table.rows ?? []).map((r) => ({ label: String(r[0]?.value ?? ''), x: xs.get(String(r[0]?.value)), y: r[y.column]?.value })).filter((p) => typeof p.x === 'number' && typeof p.y === 'number');
  if (!points.length) return '';
  return el('figure', { class: 'chart', id: 'accuracy-chart' }, scatter(points, x.label, y.label, false), el('figcaption', {}, `${y.label} (${y.table.title}) against ${x.label} (${x.table.title}), one point per model`));
}

/**
 * A small SVG scatter plot; `unit` fixes both axes to 0…1 and draws the diagonal (calibration). Points sit inside the
 * axes (an inner pad keeps a 0 off the axis line); model labels are placed by `placeLabels` once the chart is on the
 * page, where their sizes can be measured.
 */
function scatter(points, xLabel, yLabel, unit) {
  const [w, h] = [560, 320];
  const plot = { left: 72, right: w - 16, top: 14, bottom: h - 50 };
  const pad = 12;
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const xTicks = niceTicks(unit ? 1 : Math.max(...xs) * 1.05 || 1);
  const yTicks = niceTicks(unit ? 1 : Math.max(1, ...ys));
  const [x0, x1] = [0, xTicks.at(-1)];
  const [y0, y1] = [0, yTicks.at(-1)];
  const sx = (v) => plot.left + pad + ((v - x0) / (x1 - x0)) * (plot.right - plot.left - 2 * pad);
  const sy = (v) => plot.bottom - pad - ((v - y0) / (y1 - y0)) * (plot.bottom - plot.top - 2 * pad);
  const root = svg('svg', { viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: 'img', class: 'scatter', 'data-plot': `${plot.left} ${plot.top} ${plot.right} ${plot.bottom}` });
  root.append(svg('line', { x1: plot.left, y1: plot.bottom, x2: plot.right, y2: plot.bottom, class: 'axis' }), svg('line', { x1: plot.left, y1: plot.top, x2: plot.left, y2: plot.bottom, class: 'axis' }));
  for (const xv of xTicks) {
    root.append(svg('line', { x1: sx(xv), y1: plot.bottom, x2: sx(xv), y2: plot.bottom + 4, class: 'axis' }));
    root.append(svg('text', { x: sx(xv), y: plot.bottom + 17, class: 'tick', 'text-anchor': 'middle' }, tickText(xv)));
  }
  for (const yv of yTicks) {
    root.append(svg('line', { x1: plot.left - 4, y1: sy(yv), x2: plot.left, y2: sy(yv), class: 'axis' }), svg('line', { x1: plot.left, y1: sy(yv), x2: plot.right, y2: sy(yv), class: 'grid' }));
    root.append(svg('text', { x: plot.left - 7, y: sy(yv) + 4, class: 'tick', 'text-anchor': 'end' }, tickText(yv)));
  }
  root.append(svg('text', { x: (plot.left + plot.right) / 2, y: h - 10, class: 'label', 'text-anchor': 'middle' }, xLabel), svg('text', { x: 16, y: (plot.top + plot.bottom) / 2, class: 'label', transform: `rotate(-90 16 ${(plot.top + plot.bottom) / 2})`, 'text-anchor': 'middle' }, yLabel));
  if (unit) {
    root.append(svg('line', { x1: sx(0), y1: sy(0), x2: sx(1), y2: sy(1), class: 'diagonal' }));
    root.append(svg('polyline', { points: points.map((p) => `${sx(p.x)},${sy(p.y)}`).join(' '), class: 'curve' }));
  }
  for (const p of points) {
    const [cx, cy] = [sx(p.x), sy(p.y)];
    root.append(svg('circle', { cx, cy, r: p.r ?? 5, class: 'point' }, svg('title', {}, `${p.label}: (${num(p.x)}, ${num(p.y)})`)));
    if (!unit) root.append(svg('text', { x: cx + 9, y: cy + 4, class: 'point-label', 'data-cx': cx, 'data-cy': cy }, p.label));
  }
  return root;
}

/** 0 … at least `max` in 3–6 round steps (1, 2, 2.5 or 5 × 10ⁿ), so that axis numbers read as plain values. */
function niceTicks(max) {
  const raw = max / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * power).find((s) => s >= raw);
  const count = Math.ceil(max / step - 1e-9);
  return Array.from({ length: count + 1 }, (_, i) => i * step);
}

const tickText = (v) => String(Number(v.toPrecision(6)));

/**
 * Puts each point label beside its point: right, left, above-right, below-right, above-left, below-left, whichever is
 * first to stay inside the axes without covering another label or point; failing all, the one that overlaps least.
 */
function placeLabels(root) {
  const [left, top, right, bottom] = root.getAttribute('data-plot').split(' ').map(Number);
  const taken = [...root.querySelectorAll('circle.point')].map((c) => {
    const [cx, cy, r] = ['cx', 'cy', 'r'].map((a) => Number(c.getAttribute(a)));
    return { x: cx - r, y: cy - r, width: 2 * r, height: 2 * r };
  });
  const overlap = (a, b) => Math.max(0, Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x)) * Math.max(0, Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y));
  for (const text of root.querySelectorAll('text.point-label')) {
    const [cx, cy] = [Number(text.dataset.cx), Number(text.dataset.cy)];
    const box = text.getBBox();
    const [bw, bh] = [box.width, box.height];
    const gap = 9;
    const candidates = [
      [cx + gap, cy - bh / 2], [cx - gap - bw, cy - bh / 2],
      [cx + gap / 2, cy - gap - bh], [cx + gap / 2, cy + gap], [cx - gap / 2 - bw, cy - gap - bh], [cx - gap / 2 - bw, cy + gap],
    ].map(([x, y]) => ({ x, y, width: bw, height: bh }));
    const cost = (b) => {
      const outside = Math.max(0, left + 2 - b.x) + Math.max(0, b.x + b.width - right) + Math.max(0, top - b.y) + Math.max(0, b.y + b.height - (bottom - 2));
      return outside * 1000 + taken.reduce((sum, t) => sum + overlap(b, t), 0);
    };
    let best = candidates[0];
    for (const c of candidates) {
      if (cost(c) < cost(best)) best = c;
      if (cost(best) === 0) break;
    }
    // Move the text so its box lands on the chosen spot (the baseline sits below the box's top by box.y - y).
    text.setAttribute('x', String(best.x + (Number(text.getAttribute('x')) - box.x)));
    text.setAttribute('y', String(best.y + (Number(text.getAttribute('y')) - box.y)));
    taken.push(best);
  }
}

async function runPage(suite, run, query) {
  const pageNo = Number(query.get('page') ?? 1);
  const size = Number(query.get('size') ?? 25);
  const q = query.get('q') ?? '';
  const [data, list, calibration] = await Promise.all([
    api(`suites/${enc(suite)}/runs/${enc(run)}`),
    api(`suites/${enc(suite)}/runs/${enc(run)}/instances?${new URLSearchParams({ page: pageNo, size, q })}`),
    api(`suites/${enc(suite)}/runs/${enc(run)}/calibration`),
  ]);
  crumbs([['suites', '#/'], [suite, href(['s', suite])], [run]]);
  const spec = data.runSpec ?? {};
  const go = (p, s, text = q) => (location.hash = href(['s', suite, 'r', run], { page: p, size: s, q: text }));
  const search = el('input', { id: 'instance-search', type: 'search', placeholder: 'filter by text', value: q });
  search.addEventListener('change', () => go(1, size, search.value));
  const compare = data.comparable.length
    ? el('p', { class: 'compare-links' }, 'Compare with: ', data.comparable.map((c) => el('a', { href: href(['s', suite, 'c', run, c.name]) }, c.model)))
    : '';
  page.replaceChildren(
    el('h1', {}, run),
    el('p', { class: 'muted' }, `model ${spec.adapter_spec?.model ?? '?'} · ${data.numInstances} instances · groups ${(spec.groups ?? []).join(', ')}`),
    compare,
    el('div', { class: 'columns' },
      el('section', {}, el('h2', {}, 'Scenario'), el('p', { class: 'description' }, String(data.scenario?.description ?? '(no scenario.json)')), keyValues('scenario-spec', { class_name: spec.scenario_spec?.class_name, ...(spec.scenario_spec?.args ?? {}) })),
      el('section', {}, el('h2', {}, 'Adapter spec'), keyValues('adapter-spec', spec.adapter_spec ?? {})),
    ),
    calibration.bins.length ? el('figure', { class: 'chart', id: 'calibration-chart' }, scatter(calibration.bins.map((b) => ({ label: `${b.count} predictions`, x: b.confidence, y: b.accuracy, r: 3 + Math.min(6, Math.sqrt(b.count)) })), 'confidence (max_prob)', 'accuracy (exact_match)', true), el('figcaption', {}, `Calibration on ${calibration.split}: ${calibration.bins.length} equal-mass bins, ECE ${calibration.ece.toPrecision(4)}`)) : '',
    metricTables(data.stats),
    el('section', {}, el('h2', {}, 'Instances'), search, pager(list, (p, s) => go(p, s)), instanceTable(suite, run, list.items), pager(list, (p, s) => go(p, s))),
  );
}

function keyValues(id, object) {
  return el('table', { id, class: 'kv' }, el('tbody', {}, Object.entries(object).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, el('code', {}, typeof v === 'string' ? v : JSON.stringify(v)))))));
}

/** stats.json as one table per (split, perturbation): metric, count, mean, min, max. */
function metricTables(stats) {
  const groups = new Map();
  for (const s of stats) {
    const n = s.name ?? {};
    const key = `${n.split ?? '(all splits)'}${n.sub_split ? `/${n.sub_split}` : ''} · ${n.perturbation ? `${n.perturbation.name}${n.perturbation.robustness ? ' (robustness)' : ''}${n.perturbation.fairness ? ' (fairness)' : ''}${n.perturbation.computed_on ? ` on ${n.perturbation.computed_on}` : ''}` : 'no perturbation'}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(s);
  }
  const sections = [...groups].map(([key, list]) =>
    el('details', { class: 'metric-group', open: key.endsWith('no perturbation') }, el('summary', {}, `${key} (${list.length} metrics)`),
      el('table', { class: 'metrics' }, el('thead', {}, el('tr', {}, ['metric', 'count', 'mean', 'min', 'max'].map((h) => el('th', {}, h)))),
        el('tbody', {}, list.map((s) => el('tr', {}, el('td', {}, String(s.name?.name ?? '')), el('td', { class: 'num' }, num(s.count)), s.count ? el('td', { class: 'num' }, num(s.mean)) : el('td', { class: 'nc' }, 'not computed'), el('td', { class: 'num' }, num(s.min)), el('td', { class: 'num' }, num(s.max))))))),
  );
  return el('section', { id: 'metrics' }, el('h2', {}, 'Metrics per split and perturbation'), sections);
}

function mark(correct) {
  return correct === null || correct === undefined ? el('span', { class: 'mark unknown' }, '–') : correct ? el('span', { class: 'mark ok', title: 'correct' }, '✓') : el('span', { class: 'mark bad', title: 'wrong' }, '✗');
}

function clip(text, n = 160) {
  const s = String(text ?? '');
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

function correctRefs(references) {
  return (references ?? []).filter((r) => (r.tags ?? []).includes('correct')).map((r) => r.output?.text ?? '').join(' | ');
}

function instanceTable(suite, run, items) {
  return el('table', { id: 'instances', class: 'instances' }, el('thead', {}, el('tr', {}, ['instance', 'input', 'correct reference', 'prediction', ''].map((h) => el('th', {}, h)))),
    el('tbody', {}, items.map((i) => el('tr', {}, el('td', {}, el('a', { href: href(['s', suite, 'r', run, 'i', i.id]) }, i.id)), el('td', { class: 'text' }, clip(i.input)), el('td', { class: 'text' }, clip(correctRefs(i.references), 80)), el('td', { class: 'text' }, clip(i.prediction?.predicted_text, 80)), el('td', {}, mark(i.correct))))));
}

function perturbationName(p) {
  return p ? String(p.name ?? 'perturbed') : 'original';
}

async function instancePage(suite, run, id) {
  const data = await api(`suites/${enc(suite)}/runs/${enc(run)}/instances/${enc(id)}`);
  crumbs([['suites', '#/'], [suite, href(['s', suite])], [run, href(['s', suite, 'r', run])], [`instance ${id}`]]);
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const cards = data.variants.map((v) => {
    const predictions = data.predictions.filter((p) => same(p.perturbation, v.perturbation));
    const requests = data.requests.filter((r) => same(r.perturbation, v.perturbation));
    const completions = data.completions.filter((c) => same(c.perturbation, v.perturbation));
    return el('article', { class: 'variant', 'data-perturbation': perturbationName(v.perturbation) },
      el('h2', {}, perturbationName(v.perturbation)),
      el('h3', {}, 'Input'), el('pre', { class: 'input' }, String(v.input?.text ?? '')),
      el('h3', {}, 'References'), el('ol', { class: 'references' }, (v.references ?? []).map((r) => el('li', { class: (r.tags ?? []).includes('correct') ? 'correct' : '' }, el('span', {}, String(r.output?.text ?? '')), (r.tags ?? []).includes('correct') ? el('span', { class: 'tag' }, 'correct') : ''))),
      predictions.map((p) => {
        const request = requests.find((r) => r.train_trial_index === p.train_trial_index)?.request;
        const strip = completions.filter((c) => c.train_trial_index === p.train_trial_index).flatMap((c) => c.completions.slice(0, 1));
        return el('section', { class: 'trial' },
          el('h3', {}, `Completion (trial ${p.train_trial_index})`),
          el('pre', { class: 'completion' }, String(p.predicted_text ?? '')),
          p.truncated_predicted_text != null && p.truncated_predicted_text !== p.predicted_text ? el('p', {}, 'truncated: ', el('code', {}, String(p.truncated_predicted_text))) : '',
          p.mapped_output != null ? el('p', {}, 'mapped output: ', el('code', {}, String(p.mapped_output))) : '',
          strip.map((c) => logprobStrip(c)),
          el('details', { class: 'stats' }, el('summary', {}, 'per-instance stats'), keyValues('', p.stats ?? {})),
          request ? el('details', { class: 'request' }, el('summary', {}, 'prompt as sent and settings'), el('pre', { class: 'prompt' }, String(request.prompt ?? '')), keyValues('', Object.fromEntries(Object.entries(request).filter(([k]) => k !== 'prompt')))) : '',
        );
      }),
    );
  });
  page.replaceChildren(el('h1', {}, `Instance ${id}`), el('p', { class: 'muted' }, `${run} · split ${data.variants[0]?.split ?? '?'} · ${data.variants.length} variant(s)`), el('div', { class: 'variants' }, cards));
  for (const d of page.querySelectorAll('details.request')) d.open = true;
}

/** The completion's tokens, each shaded by its probability, with its logprob and the top alternatives on hover. */
function logprobStrip(completion) {
  const tokens = completion.tokens ?? [];
  if (!tokens.length) return '';
  const strip = el('div', { class: 'logprobs', 'aria-label': 'completion tokens by probability' });
  for (const t of tokens) {
    const lp = typeof t.logprob === 'number' ? t.logprob : null;
    const prob = lp === null ? 0 : Math.exp(lp);
    const alternatives = Object.entries(t.top_logprobs ?? {}).sort((a, b) => b[1] - a[1]).slice(0, 5).map(([k, v]) => `${JSON.stringify(k)} ${num(v)}`).join('\n');
    const span = el('span', { class: 'token', title: `${JSON.stringify(t.text)} logprob ${lp === null ? 'none' : num(lp)} (p=${num(prob)})${alternatives ? `\ntop:\n${alternatives}` : ''}`, 'data-logprob': lp ?? '' }, String(t.text ?? '').replace(/\n/g, '⏎').replace(/ /g, '·') || '∅');
    span.style.setProperty('--p', prob.toFixed(3));
    strip.append(span);
  }
  const total = tokens.reduce((s, t) => s + (typeof t.logprob === 'number' ? t.logprob : 0), 0);
  return el('figure', { class: 'strip' }, strip, el('figcaption', {}, `${tokens.length} tokens, total logprob ${num(total)}${completion.finish_reason ? `, finish ${JSON.stringify(completion.finish_reason)}` : ''} — darker = more likely`));
}

async function comparePage(suite, a, b, query) {
  const pageNo = Number(query.get('page') ?? 1);
  const size = Number(query.get('size') ?? 25);
  const only = query.get('only') ?? 'all';
  const [data, runA, runB] = await Promise.all([
    api(`suites/${enc(suite)}/compare?${new URLSearchParams({ a, b, page: pageNo, size, only })}`),
    api(`suites/${enc(suite)}/runs/${enc(a)}`),
    api(`suites/${enc(suite)}/runs/${enc(b)}`),
  ]);
  const [modelA, modelB] = [runA.runSpec?.adapter_spec?.model ?? a, runB.runSpec?.adapter_spec?.model ?? b];
  crumbs([['suites', '#/'], [suite, href(['s', suite])], [`${modelA} vs ${modelB}`]]);
  const go = (p, s, o = only) => (location.hash = href(['s', suite, 'c', a, b], { page: p, size: s, only: o }));
  const labels = { all: `all shared (${data.shared})`, both: `both right (${data.counts.both})`, onlyA: `only ${modelA} (${data.counts.onlyA})`, onlyB: `only ${modelB} (${data.counts.onlyB})`, neither: `neither (${data.counts.neither})` };
  const filter = el('select', { id: 'compare-filter', 'aria-label': 'which instances' }, Object.entries(labels).map(([k, v]) => el('option', { value: k, selected: k === only }, v)));
  filter.addEventListener('change', () => go(1, size, filter.value));
  const rows = data.items.map((r) => el('tr', {},
    el('td', {}, r.id),
    el('td', { class: 'text' }, clip(r.input, 200)),
    el('td', { class: 'text' }, clip(correctRefs(r.references), 80)),
    el('td', { class: 'text' }, mark(r.correctA), ' ', el('a', { href: href(['s', suite, 'r', a, 'i', r.id]) }, clip(r.a?.predicted_text, 120) || '∅')),
    el('td', { class: 'text' }, mark(r.correctB), ' ', el('a', { href: href(['s', suite, 'r', b, 'i', r.id]) }, clip(r.b?.predicted_text, 120) || '∅')),
  ));
  page.replaceChildren(
    el('h1', {}, `${modelA} vs ${modelB}`),
    el('p', { class: 'muted' }, `${runA.runSpec?.scenario_spec?.class_name?.split('.').pop() ?? ''} · ${data.shared} shared instances`),
    el('table', { id: 'agreement', class: 'kv' }, el('tbody', {}, Object.entries(labels).slice(1).map(([k, v]) => el('tr', {}, el('th', {}, v.replace(/ \(\d+\)$/, '')), el('td', { class: 'num' }, String(data.counts[k])))))),
    filter,
    pager(data, (p, s) => go(p, s)),
    el('table', { id: 'comparison', class: 'instances' }, el('thead', {}, el('tr', {}, ['instance', 'input', 'correct reference', modelA, modelB].map((h) => el('th', {}, h)))), el('tbody', {}, rows)),
  );
}

// --- routing -------------------------------------------------------------------------------------------------

function showError(message) {
  const box = document.getElementById('error');
  box.hidden = !message;
  box.textContent = message ?? '';
}

let lastRoute;

async function render() {
  // Tests and scripts wait for data-loaded="true" with data-route equal to the current hash.
  const route = location.hash;
  document.body.dataset.loaded = 'false';
  const [path, search = ''] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter((p) => p !== '').map((p) => decodeURIComponent(p));
  const query = new URLSearchParams(search);
  showError(null);
  try {
    const [s, suite, kind, x, y, id] = parts;
    let name;
    if (s !== 's' || suite === undefined) await suitesPage((name = 'suites'));
    else if (kind === undefined) await suitePage(suite, (name = 'suite'));
    else if (kind === 'g' && x) await groupPage(suite, x, (name = 'group'));
    else if (kind === 'r' && x && y === 'i' && id) await instancePage(suite, x, id, (name = 'instance'));
    else if (kind === 'r' && x) await runPage(suite, x, query, (name = 'run'));
    else if (kind === 'c' && x && y) await comparePage(suite, x, y, query, (name = 'compare'));
    else throw new Error(`no page ${location.hash}: start from the suites at #/`);
    document.body.dataset.page = name;
  } catch (err) {
    page.replaceChildren();
    showError(err.message);
  }
  if (route !== location.hash) return; // a newer render is under way
  // A new page starts at the top; another page of the same list keeps the place.
  if (route.split('?')[0] !== lastRoute?.split('?')[0]) window.scrollTo(0, 0);
  lastRoute = route;
  document.body.dataset.route = route;
  document.body.dataset.loaded = 'true';
}

window.addEventListener('hashchange', () => void render());
void render();
