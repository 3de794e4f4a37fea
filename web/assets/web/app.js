// The dashboard: a hash router over pages that poll the REST API.
import * as api from './api.js';
import { el, table, state, fmtCount, fmtBytes, fmtDuration, fmtTime, pct } from './util.js';
import { draw } from './dag.js';

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const TERMINAL = new Set(['FINISHED', 'FAILED', 'CANCELED', 'SUSPENDED']);
let config = { 'refresh-interval': 3000, features: {} };

// ---- token ----
const form = document.getElementById('token-form');
const input = document.getElementById('token-input');
document.getElementById('token-button').addEventListener('click', () => { form.hidden = !form.hidden; if (!form.hidden) input.focus(); });
form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  api.setToken(input.value.trim());
  input.value = '';
  form.hidden = true;
  start();
});
document.getElementById('token-clear').addEventListener('click', () => { api.setToken(''); input.value = ''; });
api.whenUnauthorized(() => {
  form.hidden = false;
  showBanner('This cluster requires a REST token (rest.authentication.token). Enter it above.');
});

function showBanner(msg, info) {
  banner.textContent = msg;
  banner.className = info ? 'info' : '';
  banner.hidden = !msg;
}

// ---- router and polling ----
let generation = 0;
let timer = 0;

const routes = [
  [/^#\/overview$/, overviewPage, 'overview'],
  [/^#\/job\/([0-9a-fA-F]{32})$/, jobPage, 'overview'],
  [/^#\/taskmanagers$/, taskManagersPage, 'taskmanagers'],
  [/^#\/taskmanager\/([^/]+)$/, taskManagerPage, 'taskmanagers'],
  [/^#\/jobmanager$/, jobManagerPage, 'jobmanager'],
];

async function start() {
  try {
    config = await api.get('/config');
    document.getElementById('version').textContent = config['flink-version'] ? 'gofl ' + config['flink-version'] : '';
    showBanner('');
  } catch (e) {
    if (!(e instanceof api.HTTPError && e.status === 401)) showBanner('Cannot reach the REST API: ' + e.message);
    return;
  }
  route();
}

function route() {
  const gen = ++generation;
  clearTimeout(timer);
  const hash = location.hash || '#/overview';
  for (const [re, page, nav] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    document.querySelectorAll('header nav a').forEach((a) => a.classList.toggle('active', a.dataset.nav === nav));
    const update = page(...m.slice(1).map(decodeURIComponent));
    const tick = async () => {
      if (gen !== generation) return;
      try {
        await update();
        if (gen === generation && banner.textContent.startsWith('Refresh failed')) showBanner('');
      } catch (e) {
        if (gen === generation) showBanner('Refresh failed: ' + e.message);
      }
      if (gen === generation) timer = setTimeout(tick, Math.max(500, config['refresh-interval'] || 3000));
    };
    tick();
    return;
  }
  main.replaceChildren(el('h1', {}, 'Not found'), el('p', {}, 'No page at ', hash, '. ', el('a', { href: '#/overview' }, 'Overview')));
}

window.addEventListener('hashchange', route);

// slot is a titled section whose body each poll replaces.
function slot(title, id) {
  const body = el('div', { class: 'body' });
  const s = el('section', { class: 'card', id }, title ? el('h2', {}, title) : null, body);
  s.fill = (...children) => body.replaceChildren(...children.flat(2).filter((c) => c !== null && c !== undefined && c !== false));
  return s;
}

// ---- overview ----
function overviewPage() {
  const stats = el('div', { class: 'stats', id: 'cluster-stats' });
  const running = slot('Running jobs', 'running-jobs');
  const finished = slot('Completed jobs', 'completed-jobs');
  main.replaceChildren(el('h1', {}, 'Cluster overview'), stats, el('div', { class: 'spacer' }), running, finished);
  return async () => {
    const [ov, jobs] = await Promise.all([api.get('/overview'), api.get('/jobs/overview')]);
    const stat = (n, l, key) => el('div', { class: 'stat', 'data-stat': key }, el('div', { class: 'n' }, String(n)), el('div', { class: 'l' }, l));
    stats.replaceChildren(
      stat(ov.taskmanagers, 'TaskManagers', 'taskmanagers'),
      stat(ov['slots-total'], 'slots', 'slots-total'),
      stat(ov['slots-available'], 'slots available', 'slots-available'),
      stat(ov['jobs-running'], 'running jobs', 'jobs-running'),
      stat(ov['jobs-finished'], 'finished', 'jobs-finished'),
      stat(ov['jobs-cancelled'], 'cancelled', 'jobs-cancelled'),
      stat(ov['jobs-failed'], 'failed', 'jobs-failed'));
    const rows = (list) => list.sort((a, b) => b['start-time'] - a['start-time']).map((j) => ({
      attrs: { 'data-job-id': j.jid },
      cells: [el('a', { href: '#/job/' + j.jid }, j.name || j.jid), state(j.state), fmtTime(j['start-time']), fmtDuration(j.duration),
        `${j.tasks.running}/${j.tasks.total}`, j.jid],
    }));
    const head = ['Job', 'Status', 'Started', 'Duration', 'Tasks running#', 'ID'];
    const live = jobs.jobs.filter((j) => !TERMINAL.has(j.state));
    const done = jobs.jobs.filter((j) => TERMINAL.has(j.state));
    running.fill(live.length ? table(head, rows(live)) : el('p', { class: 'muted' }, 'No running jobs.'));
    finished.fill(done.length ? table(head, rows(done)) : el('p', { class: 'muted' }, 'No completed jobs.'));
  };
}

// ---- job ----
function jobPage(jobId) {
  const title = el('h1', {}, 'Job ', jobId);
  const summary = el('div', { class: 'stats', id: 'job-summary' });
  const actions = el('div', { class: 'actions', id: 'job-actions' });
  const graph = slot('Job graph', 'job-graph');
  const vertices = slot('Vertices', 'job-vertices');
  const subtasks = slot('Subtasks', 'job-subtasks');
  const exceptions = slot('Exceptions', 'job-exceptions');
  const checkpoints = slot('Checkpoints', 'job-checkpoints');
  main.replaceChildren(title, summary, actions, graph, vertices, subtasks, exceptions, checkpoints);
  const actionState = { msg: el('span', { class: 'muted', id: 'action-status' }) };
  let lastState = '';
  const renderActions = (st) => {
    if (st === lastState) return;
    lastState = st;
    if (!config.features['web-cancel']) {
      actions.replaceChildren(el('span', { class: 'muted' }, 'Cancelling is disabled on this cluster (web.cancel.enable: false).'));
      return;
    }
    if (TERMINAL.has(st)) { actions.replaceChildren(actionState.msg); return; }
    const confirmButton = (label, run, id) => {
      const b = el('button', { type: 'button', class: 'danger', id }, label);
      let armed = false;
      b.addEventListener('click', async () => {
        if (!armed) { armed = true; b.textContent = 'Confirm: ' + label.toLowerCase(); return; }
        b.disabled = true;
        try { await run(); } catch (e) { actionState.msg.textContent = label + ' failed: ' + e.message; b.disabled = false; }
      });
      return b;
    };
    actions.replaceChildren(
      confirmButton('Cancel job', async () => {
        await api.send('PATCH', `/jobs/${jobId}?mode=cancel`);
        actionState.msg.textContent = 'Cancelling…';
      }, 'cancel-job'),
      confirmButton('Stop with savepoint', async () => {
        const r = await api.send('POST', `/jobs/${jobId}/stop`, { drain: false });
        actionState.msg.textContent = 'Stopping with a savepoint…';
        watchSavepoint(jobId, r['request-id'], actionState.msg);
      }, 'stop-job'),
      actionState.msg);
  };
  return async () => {
    const [job, exc, cps] = await Promise.all([api.get(`/jobs/${jobId}`), api.get(`/jobs/${jobId}/exceptions`),
      api.optional(`/jobs/${jobId}/checkpoints`)]);
    const views = await Promise.all(job.vertices.map(async (v) => {
      const [info, bp, wms] = await Promise.all([api.get(`/jobs/${jobId}/vertices/${v.id}`), api.get(`/jobs/${jobId}/vertices/${v.id}/backpressure`),
        api.optional(`/jobs/${jobId}/vertices/${v.id}/watermarks`)]);
      return { v, info, bp, wms: watermarksOf(wms) };
    }));
    title.replaceChildren(job.name || jobId, ' ', state(job.state));
    summary.replaceChildren(
      ...[['ID', job.jid], ['Type', job['job-type']], ['Started', fmtTime(job['start-time'])], ['Duration', fmtDuration(job.duration)],
        ['Ended', job['end-time'] > 0 ? fmtTime(job['end-time']) : '–']]
        .map(([l, n]) => el('div', { class: 'stat' }, el('div', { class: 'l' }, l), el('div', {}, n))));
    renderActions(job.state);
    const byId = new Map(job.vertices.map((v) => [v.id, v]));
    const ratios = new Map(views.map(({ v, bp }) => [v.id, ratioOf(bp)]));
    let plan = job.plan;
    if (!plan || !plan.nodes || !plan.nodes.length) {
      plan = { nodes: job.vertices.map((v) => ({ id: v.id, description: v.name, parallelism: v.parallelism, inputs: [] })) };
    }
    graph.fill(draw(plan, byId, ratios));
    const lowWatermarks = new Map(views.map(({ v, wms }) => [v.id, wms.size ? [...wms.values()].reduce((a, b) => (BigInt(a) < BigInt(b) ? a : b)) : null]));
    vertices.fill(table(['Name', 'Status', 'Parallelism#', 'Records in#', 'Bytes in#', 'Records out#', 'Bytes out#', 'Back-pressure', 'Busy#', 'Low watermark', 'Duration#'],
      job.vertices.map((v) => {
        const r = ratios.get(v.id), m = v.metrics || {};
        return {
          attrs: { 'data-vertex-id': v.id },
          cells: [v.name, state(v.status), v.parallelism, fmtCount(m['read-records']), fmtBytes(m['read-bytes']), fmtCount(m['write-records']),
            fmtBytes(m['write-bytes']), el('span', { class: 'bp-' + (r.level || 'ok') }, r.level ? `${r.level} (${pct(r.bp)})` : '–'),
            pct(r.busy), el('span', { class: 'watermark' }, fmtWatermark(lowWatermarks.get(v.id))), fmtDuration(v.duration)],
        };
      })));
    subtasks.fill(views.map(({ v, info, wms }) => el('details', { open: true, 'data-vertex-id': v.id }, el('summary', {}, v.name),
      table(['#', 'Status', 'Attempt#', 'TaskManager', 'Host', 'Records in#', 'Records out#', 'Bytes in#', 'Bytes out#', 'Watermark'],
        info.subtasks.map((s) => ({
          attrs: { 'data-subtask': s.subtask },
          cells: [s.subtask, state(s.status), s.attempt, s['taskmanager-id'] ? el('a', { href: '#/taskmanager/' + encodeURIComponent(s['taskmanager-id']) }, s['taskmanager-id']) : '–',
            s.host || '–', fmtCount(s.metrics['read-records']), fmtCount(s.metrics['write-records']), fmtBytes(s.metrics['read-bytes']),
            fmtBytes(s.metrics['write-bytes']), fmtWatermark(wms.get(s.subtask))],
        }))))));
    exceptions.fill(renderExceptions(exc));
    checkpoints.fill(renderCheckpoints(cps));
  };
}

// watermarksOf takes Flink's watermarks view ([{id: "0.currentInputWatermark",
// value: "..."}]) to a map of subtask index to watermark string (longs:
// beyond a JS number's precision).
function watermarksOf(wms) {
  const out = new Map();
  for (const w of wms || []) out.set(Number(w.id.split('.')[0]), w.value);
  return out;
}

// fmtWatermark shows an epoch-ms watermark as a time; Flink's bounds as
// words.
function fmtWatermark(v) {
  if (v == null) return '–';
  if (v === '-9223372036854775808') return 'No watermark';
  if (v === '9223372036854775807') return 'End of input';
  return fmtTime(Number(v));
}

// ratioOf takes a vertex's back-pressure view to its worst subtask's
// back-pressured ratio and its subtasks' mean busy ratio.
function ratioOf(bp) {
  const subs = (bp && bp.subtasks) || [];
  if (!subs.length) return {};
  return { bp: Math.max(...subs.map((s) => s.ratio)), busy: subs.reduce((a, s) => a + s.busyRatio, 0) / subs.length, level: bp['backpressure-level'] };
}

async function watchSavepoint(jobId, rid, msg) {
  for (let i = 0; i < 600; i++) {
    const s = await api.get(`/jobs/${jobId}/savepoints/${rid}`);
    if (s.status.id === 'COMPLETED') {
      const op = s.operation || {};
      msg.textContent = op['failure-cause'] ? 'Savepoint failed: ' + op['failure-cause']['stack-trace'] : 'Savepoint: ' + (op.location || '');
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function renderExceptions(exc) {
  const entries = (exc && exc.exceptionHistory && exc.exceptionHistory.entries) || [];
  if (!entries.length) return el('p', { class: 'muted' }, 'No exceptions.');
  return [
    el('h3', {}, 'Root cause'),
    el('pre', { id: 'root-exception' }, exc['root-exception'] || entries[0].stacktrace),
    el('h3', {}, 'History'),
    table(['Time', 'Exception', 'Task', 'Location', 'Type', 'Cause'], entries.map((e) => [fmtTime(e.timestamp), e.exceptionName, e.taskName || '–',
      e.location || '–', e.failureType, el('details', {}, el('summary', {}, (e.stacktrace || '').split('\n')[0]), el('pre', {}, e.stacktrace))])),
    exc.exceptionHistory.truncated ? el('p', { class: 'muted' }, 'Older entries were dropped.') : null,
  ];
}

function renderCheckpoints(cps) {
  if (!cps || !cps.counts || !cps.counts.total) return el('p', { class: 'muted' }, 'No checkpoints.');
  const c = cps.counts, s = cps.summary;
  const mma = (x, f) => (x ? `${f(x.min)} / ${f(x.avg)} / ${f(x.max)}` : '–');
  return [
    table(['Total#', 'Completed#', 'In progress#', 'Failed#', 'Restored#'], [[c.total, c.completed, c.in_progress, c.failed, c.restored]], { id: 'checkpoint-counts' }),
    el('h3', {}, 'Summary (min / avg / max)'),
    table(['', 'Value'], [['End-to-end duration', mma(s.end_to_end_duration, fmtDuration)], ['Checkpointed size', mma(s.checkpointed_size, fmtBytes)],
      ['State size', mma(s.state_size, fmtBytes)], ['Buffered during alignment', mma(s.alignment_buffered, fmtBytes)],
      ['Processed in-flight data', mma(s.processed_data, fmtBytes)], ['Persisted in-flight data', mma(s.persisted_data, fmtBytes)]]),
    el('h3', {}, 'History'),
    table(['ID#', 'Status', 'Type', 'Triggered', 'Duration#', 'Checkpointed size#', 'Alignment#', 'Aligned buffered#', 'Acknowledged', 'Path'],
      (cps.history || []).map((h) => ({
        attrs: { 'data-checkpoint-id': h.id },
        cells: [h.id, state(h.status), h.is_savepoint ? 'savepoint' : (h.checkpoint_type || 'checkpoint'), fmtTime(h.trigger_timestamp),
          fmtDuration(h.end_to_end_duration), fmtBytes(h.checkpointed_size), fmtDuration(h.alignment_duration), fmtBytes(h.alignment_buffered),
          `${h.num_acknowledged_subtasks}/${h.num_subtasks}`, h.external_path || h.failure_message || '–'],
      })), { id: 'checkpoint-history' }),
  ];
}

// ---- TaskManagers ----
function taskManagersPage() {
  const list = slot('', 'taskmanager-list');
  main.replaceChildren(el('h1', {}, 'TaskManagers'), list);
  return async () => {
    const tms = (await api.get('/taskmanagers')).taskmanagers;
    list.fill(tms.length ? table(['ID', 'Address', 'Data port#', 'Slots#', 'Free slots#', 'CPU cores#', 'Physical memory#', 'Last heartbeat'], tms.map((t) => ({
      attrs: { 'data-taskmanager-id': t.id },
      cells: [el('a', { href: '#/taskmanager/' + encodeURIComponent(t.id) }, t.id), t.path, t.dataPort, t.slotsNumber, t.freeSlots,
        t.hardware ? t.hardware.cpuCores : '–', t.hardware ? fmtBytes(t.hardware.physicalMemory) : '–', fmtTime(t.timeSinceLastHeartbeat)],
    }))) : el('p', { class: 'muted' }, 'No TaskManagers registered.'));
  };
}

function taskManagerPage(id) {
  const details = slot('Slots', 'taskmanager-details');
  const memory = slot('Memory', 'taskmanager-memory');
  const logs = slot('Logs', 'taskmanager-logs');
  main.replaceChildren(el('h1', {}, 'TaskManager ', id), details, memory, logs);
  const enc = encodeURIComponent(id);
  let logsShown = false;
  return async () => {
    const t = await api.get('/taskmanagers/' + enc);
    details.fill(table(['Address', 'Data port#', 'Slots#', 'Free slots#', 'Last heartbeat'], [[t.path, t.dataPort, t.slotsNumber, t.freeSlots, fmtTime(t.timeSinceLastHeartbeat)]]));
    const mem = await api.optional(`/taskmanagers/${enc}/metrics?get=Status.Go.Memory.Heap.Used,Status.Go.Memory.Heap.Committed,Status.Go.Memory.Total,Status.Go.Goroutines`);
    const hw = t.hardware ? [['Physical memory', fmtBytes(t.hardware.physicalMemory)], ['Free memory at start', fmtBytes(t.hardware.freeMemory)],
      ['CPU cores', t.hardware.cpuCores]] : [];
    if (t.memoryConfiguration && t.memoryConfiguration.totalProcessMemory) hw.push(['Memory limit', fmtBytes(t.memoryConfiguration.totalProcessMemory)]);
    const rows = hw.concat((mem || []).map((m) => [m.id, m.id.includes('Memory') ? fmtBytes(Number(m.value)) : m.value]));
    memory.fill(rows.length ? table(['Metric', 'Value#'], rows) : el('p', { class: 'muted' }, 'This cluster does not report TaskManager memory over REST.'));
    if (!logsShown) {
      logsShown = true;
      logs.fill(await logLinks(`/taskmanagers/${enc}`));
    }
  };
}

// logLinks offers a process's log and stdout (Flink's /logs and /stdout),
// where the cluster serves them; each is fetched with the token.
async function logLinks(prefix) {
  const out = [];
  for (const [what, path] of [['Log', prefix + '/logs'], ['Stdout', prefix + '/stdout']]) {
    let body;
    try { body = await api.text(path); } catch (e) {
      if (e instanceof api.HTTPError && e.status !== 401) { out.push(el('p', { class: 'muted' }, `${what}: not served by this cluster (${e.status}).`)); continue; }
      throw e;
    }
    const pre = el('pre', { class: 'log' });
    const files = listedLogs(body);
    if (files) {
      out.push(el('p', {}, what + ': ', files.length ? files.map((f) => [el('a', { href: api.url(`${path}/${encodeURIComponent(f.name)}`), class: 'log-link' }, f.name), ' ']) : 'none'));
    } else {
      pre.textContent = body.length > 65536 ? '…' + body.slice(-65536) : body;
      out.push(el('details', {}, el('summary', {}, what, ' ', el('a', { href: api.url(path) }, '(raw)')), pre));
    }
  }
  return out;
}

// listedLogs reads Flink's log list ({"logs": [{"name", "size"}]}), or null
// for a body that is the log itself.
function listedLogs(body) {
  try {
    const j = JSON.parse(body);
    return j && Array.isArray(j.logs) ? j.logs : null;
  } catch { return null; }
}

// ---- JobManager ----
function jobManagerPage() {
  const cfg = slot('Configuration', 'jobmanager-config');
  const metrics = slot('Runtime', 'jobmanager-metrics');
  const logs = slot('Logs', 'jobmanager-logs');
  main.replaceChildren(el('h1', {}, 'JobManager'), cfg, metrics, logs);
  let logsShown = false;
  return async () => {
    const [entries, m] = await Promise.all([api.get('/jobmanager/config'),
      api.optional('/jobmanager/metrics?get=Status.Go.Memory.Heap.Used,Status.Go.Memory.Total,Status.Go.Goroutines,numRegisteredTaskManagers')]);
    cfg.fill(entries.length ? table(['Key', 'Value'], entries.map((e) => ({ attrs: { 'data-key': e.key }, cells: [e.key, e.value] })))
      : el('p', { class: 'muted' }, 'All options are at their defaults.'));
    metrics.fill(m && m.length ? table(['Metric', 'Value#'], m.map((x) => [x.id, x.id.includes('Memory') ? fmtBytes(Number(x.value)) : x.value])) : el('p', { class: 'muted' }, '–'));
    if (!logsShown) {
      logsShown = true;
      logs.fill(await logLinks('/jobmanager'));
    }
  };
}

start();
