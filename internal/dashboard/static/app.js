// Starflow dashboard: a small single-page app over the public HTTP API
// (the same routes the CLI and the Go client use; GET /openapi.json).
// No framework and no build step: the DOM is built with h(), which only
// ever sets text (never HTML), so nothing a run, a definition or a caller
// wrote can inject markup. The API key lives in an HttpOnly cookie set by
// POST /ui/sign-in; requests that change state carry the X-Starflow-CSRF
// header (the double-submit cookie), which a forged form cannot.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const STATUSES = ['queued', 'running', 'paused', 'succeeded', 'failed', 'interrupted', 'cancelled'];
const ROLE_RANK = { viewer: 1, operator: 2, admin: 3 };
const KINDS = ['service_call', 'context_set', 'fail', 'if', 'try', 'repeat_until', 'for_each', 'parallel',
  'wait', 'workflow_call', 'session_read', 'session_write'];
const COMMON = new Set(['id', 'when', 'run_after', 'retry_policy', 'timeout', 'output']);
const ITEMS_SHOWN = 60; // loop items / iterations drawn per construct

// ---- DOM -------------------------------------------------------------

// h builds an element: attrs (on* are listeners, class, data-*, aria-*,
// booleans), children (strings become text nodes, arrays are flattened,
// null/false skipped). A tag "svg:rect" is made in the SVG namespace.
function h(tag, attrs, ...kids) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  const add = (c) => {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(add); return; }
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  };
  kids.forEach(add);
  return el;
}
const $ = (sel, root) => (root || document).querySelector(sel);
const link = (href, ...kids) => h('a', { href, 'data-link': true }, ...kids);
function replace(el, ...kids) { el.replaceChildren(); kids.flat().forEach((k) => k && el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)))); }

// ---- formatting ------------------------------------------------------

const short = (id) => (id || '').slice(0, 8);
function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return t;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
}
// fmtShort is a compact time for table cells (no year, 24 h).
function fmtShort(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return t;
  return d.toLocaleString(undefined, { month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}
function fmtDur(ms) {
  if (ms === null || ms === undefined || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} m`;
}
function ago(t) {
  if (!t) return '';
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (s < 0) return `in ${fmtDur(-s * 1000)}`;
  return `${fmtDur(s * 1000)} ago`;
}
function json(v) {
  if (v === undefined || v === null) return 'null';
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}
const badge = (text, cls, title) => h('span', { class: `badge s-${cls || text}`, title }, text);

// ---- the API ---------------------------------------------------------

class APIError extends Error {
  constructor(status, problem) {
    const p = problem && typeof problem === 'object' ? problem : { detail: String(problem || '') };
    let msg = p.detail || p.title || `HTTP ${status}`;
    if (Array.isArray(p.errors) && p.errors.length) {
      msg += ': ' + p.errors.map((e) => (e.location ? `${e.location}: ` : '') + e.message).join('; ');
    }
    super(msg);
    this.status = status;
    this.problem = p;
    this.code = p.code || '';
  }
}
function cookie(name) {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return '';
}
async function api(method, path, body, opts) {
  opts = opts || {};
  const headers = { Accept: 'application/json' };
  let payload;
  if (body !== undefined) {
    if (opts.raw) { payload = body; headers['Content-Type'] = opts.type || 'application/yaml'; }
    else { payload = JSON.stringify(body); headers['Content-Type'] = 'application/json'; }
  }
  if (method !== 'GET' && method !== 'HEAD') {
    const token = cookie('starflow_csrf');
    if (token) headers['X-Starflow-CSRF'] = token;
  }
  const res = await fetch(path, { method, headers, body: payload, credentials: 'same-origin' });
  const ct = res.headers.get('Content-Type') || '';
  const data = ct.includes('json') ? await res.json().catch(() => null) : await res.text();
  if (res.status === 401 && !opts.noRedirect) {
    signInNeeded(data && data.detail);
  }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}
const enc = encodeURIComponent;

// ---- session and roles ----------------------------------------------

let me = null; // GET /api/me
// meRefusal is why GET /api/me refused a page that was signed in (its
// cookie's key revoked, unknown): the sign-in page says so.
let meRefusal = '';
function can(role) { return !!me && (ROLE_RANK[me.role] || 0) >= ROLE_RANK[role]; }
// signInWhy is why this page sent itself to the sign-in (the API's 401
// detail). It is kept here, not in the address, so the sign-in page shows
// only what the server or this page said, never a text a link put there.
let signInWhy = '';
function signInNeeded(detail) {
  if (location.pathname === '/sign-in') return;
  const next = location.pathname + location.search;
  signInWhy = detail || '';
  history.replaceState(null, '', `/sign-in?next=${enc(next)}`);
  render();
}
async function loadMe() {
  try {
    me = await api('GET', '/api/me', undefined, { noRedirect: true });
  } catch (e) {
    me = null;
    if (e.status !== 401) throw e;
    meRefusal = cookie('starflow_csrf') ? e.message : '';
  }
  const who = $('#who');
  if (!me) { replace(who); return; }
  const kids = [h('span', { title: 'the API key this page uses' },
    me.auth === 'open' ? 'no keys configured (loopback): admin' : `${me.key_name || me.key_id} · ${me.role}`,
    me.workspace ? ` · ${me.workspace}` : '', me.env ? `/${me.env}` : '')];
  if (me.via === 'cookie') {
    kids.push(h('form', { method: 'post', action: '/ui/sign-out' }, h('button', { type: 'submit' }, 'Sign out')));
  }
  replace(who, kids);
}

// ---- router ----------------------------------------------------------

const routes = [
  [/^\/(?:runs)?$/, pageRuns, 'runs'],
  [/^\/runs\/([0-9a-fA-F-]{8,36})$/, pageRun, 'runs'],
  [/^\/definitions$/, pageDefinitions, 'definitions'],
  [/^\/definitions\/([^/]+)$/, pageDefinition, 'definitions'],
  [/^\/dead-letters$/, pageDeadLetters, 'dead-letters'],
  [/^\/schedules$/, pageSchedules, 'schedules'],
  [/^\/health$/, pageHealth, 'health'],
  [/^\/sign-in$/, pageSignIn, ''],
];
let leave = []; // cleanups of the current page (streams, timers)
function onLeave(fn) { leave.push(fn); }
function navigate(href, replaceState) {
  if (replaceState) history.replaceState(null, '', href); else history.pushState(null, '', href);
  render();
}
async function render() {
  leave.forEach((fn) => { try { fn(); } catch { /* closing */ } });
  leave = [];
  const root = $('#main');
  delete root.dataset.ready; // set again by the page once it has drawn
  delete root.dataset.status;
  // Each page draws into a view of its own: a page still loading when
  // the next one starts draws into a detached view, never over it.
  const main = h('div', { class: 'view' }, h('p', { class: 'muted' }, 'Loading…'));
  root.replaceChildren(main);
  const path = location.pathname;
  for (const [re, page, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    $('header nav').hidden = nav === '';
    document.querySelectorAll('header nav a').forEach((a) => {
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    });
    try {
      await page(main, ...m.slice(1).map(decodeURIComponent));
    } catch (e) {
      if (e instanceof APIError && e.status === 401) return;
      replace(main, h('div', { class: 'notice error', role: 'alert' }, e.message || String(e)));
    }
    return;
  }
  replace(main, h('h1', {}, 'Not found'), h('p', {}, 'No page at ', h('code', {}, path), '. ', link('/runs', 'Runs')));
}
document.addEventListener('click', (ev) => {
  const a = ev.target.closest && ev.target.closest('a[data-link]');
  if (!a || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin) return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', render);
// Leaving the page closes its streams at once: a browser holds only a
// few connections per server, and a stream left to the unload would
// keep one.
window.addEventListener('pagehide', () => { leave.forEach((fn) => { try { fn(); } catch { /* closing */ } }); leave = []; });

// markReady says on <main> that the page in view has drawn (the browser
// tests and the benchmark wait for it): data-ready is the page, data-status
// a run's status, data-drawn-ms the time since the navigation began.
function markReady(view, page, status) {
  if (!view.isConnected) return;
  const root = $('#main');
  if (status) root.dataset.status = status;
  root.dataset.drawnMs = String(Math.round(performance.now()));
  root.dataset.ready = page;
}
function loading(main, title) { replace(main, h('h1', {}, title), h('p', { class: 'muted' }, 'Loading…')); }
function errorBox(e) { return h('div', { class: 'notice error', role: 'alert' }, e.message || String(e)); }

// ---- sign-in ---------------------------------------------------------

async function pageSignIn(main) {
  const q = new URLSearchParams(location.search);
  const next = q.get('next') || '/runs';
  document.title = 'Sign in · Starflow';
  const why = {
    missing: 'Type an API key.', malformed: 'That is not an API key: a key is sf_ and 43 characters.',
    unknown: 'This server does not know that key.', revoked: 'That key was revoked.',
    rate_limited: 'Too many sign-in attempts from here: wait a few seconds and try again.',
    unavailable: 'The server could not read its keys just now: try again.',
  };
  // ?error= is one of the server's codes; any other text is not shown.
  const code = q.get('error');
  const err = code ? (why[code] || 'The sign-in failed: try again.') : signInWhy;
  replace(main, h('div', { class: 'signin panel' },
    h('h1', {}, 'Sign in'),
    h('p', { class: 'muted' }, 'This server needs an API key. Create one with ', h('code', {}, 'starflow keys create --name NAME --role viewer'), '.'),
    err ? h('div', { class: 'notice error', role: 'alert' }, err) : null,
    h('form', { method: 'post', action: '/ui/sign-in', class: 'form-approval' },
      h('label', {}, 'API key', h('input', { type: 'password', name: 'key', required: true, autocomplete: 'current-password', placeholder: 'sf_…', autofocus: true, id: 'key' })),
      h('input', { type: 'hidden', name: 'next', value: next.startsWith('/') && !next.startsWith('//') ? next : '/runs' }),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')))));
  $('#key').focus();
}

// ---- runs list -------------------------------------------------------

// errorText is a run's error message: its typed error's (an older
// server's string as it is).
function errorText(e) {
  if (!e) return '';
  return typeof e === 'string' ? e : (e.message || '');
}

// errorWhere is a typed error's type and origin: "http 404 at step get
// (scope checkout.item_2)", and its cause's type for a child_failed.
function errorWhere(e) {
  let s = e.type || 'error';
  if (e.status) s += ' ' + e.status;
  if (e.step_id) s += ` at step ${e.step_id}` + (e.scope_path ? ` (scope ${e.scope_path})` : '');
  if (e.cause && e.cause.type) s += ` · cause: ${e.cause.type}` + (e.cause.message ? ` (${e.cause.message})` : '');
  return s;
}

function stuckText(s) {
  if (!s) return '';
  const d = s.detail || {};
  return d.message || s.reason;
}
function runBadges(r) {
  const out = [badge(r.status)];
  const s = r.stuck;
  if (r.dead_lettered) out.push(badge('dead-lettered', 'dead'));
  if (s && s.reason === 'lease_stale') out.push(badge('stale', 'stale', stuckText(s)));
  if (r.status === 'paused' || (s && s.reason && s.reason.startsWith('waiting_'))) out.push(badge('waiting', 'waiting', s ? stuckText(s) : ''));
  if (r.cancel_requested && !TERMINAL.has(r.status) && !(s && s.reason === 'cancel_requested')) out.push(badge('cancel requested', 'stuck'));
  // The reason as a badge, unless a badge above already says it.
  if (s && s.reason !== 'lease_stale' && s.reason !== r.status && !s.reason.startsWith('waiting_')) out.push(badge(s.reason.replace(/_/g, ' '), 'stuck', stuckText(s)));
  return h('span', { class: 'badges' }, out);
}

async function pageRuns(main) {
  document.title = 'Runs · Starflow';
  const q = new URLSearchParams(location.search);
  // The workflows (for the filter) and the page of runs are read at once.
  const workflowsP = api('GET', '/api/workflows').then((w) => w.workflows || []).catch(() => []);
  const idq = (q.get('q') || '').trim();
  const started = performance.now();
  const pageP = idq ? null : (() => {
    const p = new URLSearchParams();
    for (const k of ['status', 'workflow', 'created_after', 'created_before', 'stale', 'cursor']) if (q.get(k)) p.set(k, q.get(k));
    p.set('limit', '50');
    return api('GET', `/api/runs?${p}`);
  })();
  pageP && pageP.catch(() => {}); // awaited below; no unhandled rejection meanwhile
  const workflows = await workflowsP;
  const field = (name) => q.get(name) || '';
  const toLocal = (v) => (v ? v.slice(0, 16) : '');
  const form = h('form', { class: 'filters', role: 'search', onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const p = new URLSearchParams();
    for (const [k, v] of f.entries()) {
      if (!v) continue;
      if (k === 'created_after' || k === 'created_before') p.set(k, new Date(v).toISOString());
      else p.set(k, v);
    }
    navigate('/runs' + (p.toString() ? '?' + p : ''));
  } },
  h('label', {}, 'Run id', h('input', { name: 'q', id: 'q', value: field('q'), placeholder: 'prefix, 8+ hex digits', size: 20, 'aria-keyshortcuts': '/' })),
  h('label', {}, 'Status', h('select', { name: 'status' }, h('option', { value: '' }, 'any'),
    STATUSES.map((s) => h('option', { value: s, selected: field('status') === s }, s)))),
  h('label', {}, 'Workflow', h('select', { name: 'workflow' }, h('option', { value: '' }, 'any'),
    workflows.map((w) => h('option', { value: w.name, selected: field('workflow') === w.name }, w.name)))),
  h('label', {}, 'Created after', h('input', { type: 'datetime-local', name: 'created_after', value: toLocal(localISO(field('created_after'))) })),
  h('label', {}, 'Created before', h('input', { type: 'datetime-local', name: 'created_before', value: toLocal(localISO(field('created_before'))) })),
  h('label', { class: 'inline', title: 'running runs whose runner has not renewed its lease within the lease TTL (30 s by default): probably gone; the lease sweep will recover them' },
    h('input', { type: 'checkbox', name: 'stale', value: 'true', checked: field('stale') === 'true' }), 'stale only (runner silent)'),
  h('button', { type: 'submit', class: 'primary' }, 'Filter'),
  q.toString() ? link('/runs', 'Clear') : null);

  const body = h('tbody', {});
  const status = h('p', { class: 'muted', 'aria-live': 'polite' });
  const pager = h('div', { class: 'pager' });
  const table = h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ['Run', 'Workflow', 'Status', 'Why', 'Attempt', 'Created', 'Duration'].map((c) => h('th', { scope: 'col' }, c)))),
    body));
  replace(main, h('h1', {}, 'Runs'), form, status, table, pager,
    h('p', { class: 'muted' }, h('span', { class: 'kbd' }, '/'), ' search · ', h('span', { class: 'kbd' }, 'j'), ' ', h('span', { class: 'kbd' }, 'k'), ' move · ', h('span', { class: 'kbd' }, 'Enter'), ' open'));

  const rowOf = (r) => h('tr', { 'data-run': r.id },
    h('td', {}, link(`/runs/${r.id}`, h('span', { class: 'id', title: r.id }, short(r.id)))),
    h('td', {}, r.workflow_name),
    h('td', { class: 'status' }, runBadges(r)),
    h('td', { class: 'why muted', 'data-reason': r.stuck ? r.stuck.reason : null }, r.stuck ? stuckText(r.stuck) : (r.error ? h('span', { class: 'mono err' }, errorText(r.error).slice(0, 160)) : '')),
    h('td', {}, `${r.attempt}/${r.max_attempts}`),
    h('td', { title: r.created_at, class: 'nowrap' }, fmtShort(r.created_at)),
    h('td', { class: 'nowrap' }, r.duration_ms ? fmtDur(r.duration_ms) : (r.status === 'running' && r.attempt_started_at ? h('span', { title: 'running for' }, ago(r.attempt_started_at).replace(' ago', '')) : '')));

  let runs = [];
  if (idq && (idq.replace(/-/g, '').length < 8 || !/^[0-9a-fA-F-]+$/.test(idq))) {
    replace(status, h('span', { role: 'alert' }, 'Search by run id: type at least 8 hex digits of it (0-9, a-f), e.g. the first 8 the table shows.'));
  } else if (idq) {
    try {
      const r = await api('GET', `/api/runs/${enc(idq)}`);
      runs = [r];
    } catch (e) {
      replace(status, e.status === 404 ? `No run starts with ${idq}.` : e.message);
    }
  } else {
    const page = await pageP;
    runs = page.runs || [];
    replace(status, runs.length ? `${runs.length} runs${page.next_cursor ? ' on this page' : ''} · read in ${Math.round(performance.now() - started)} ms` : 'No runs match.');
    const prev = (q.get('prev') || '').split(',').filter(Boolean);
    const nav = [];
    if (q.get('cursor')) {
      const back = new URLSearchParams(q); const last = prev.pop();
      if (last && last !== '-') back.set('cursor', last); else back.delete('cursor');
      if (prev.length) back.set('prev', prev.join(',')); else back.delete('prev');
      nav.push(link('/runs?' + back, '← Newer'));
    }
    if (page.next_cursor) {
      const fwd = new URLSearchParams(q);
      fwd.set('prev', [...(q.get('prev') || '').split(',').filter(Boolean), q.get('cursor') || '-'].join(','));
      fwd.set('cursor', page.next_cursor);
      nav.push(link('/runs?' + fwd, 'Older →'));
    }
    replace(pager, nav);
  }
  replace(body, runs.map(rowOf));
  markReady(main, 'runs');

  // Keyboard: / search, j/k rows, Enter opens.
  let sel = -1;
  const keys = (ev) => {
    if (ev.target.closest('input, select, textarea, button, summary') || (ev.key === 'Enter' && ev.target.closest('a'))) return;
    const rows = [...body.querySelectorAll('tr')];
    if (ev.key === '/') { ev.preventDefault(); $('#q').focus(); return; }
    if (ev.key !== 'j' && ev.key !== 'k' && ev.key !== 'Enter') return;
    if (ev.key === 'Enter' && sel >= 0 && rows[sel]) { navigate(`/runs/${rows[sel].dataset.run}`); return; }
    if (!rows.length) return;
    rows.forEach((r) => r.classList.remove('selected'));
    sel = Math.max(0, Math.min(rows.length - 1, sel + (ev.key === 'j' ? 1 : -1)));
    rows[sel].classList.add('selected');
    rows[sel].querySelector('a').focus();
  };
  document.addEventListener('keydown', keys);
  onLeave(() => document.removeEventListener('keydown', keys));

  // Live status: the all-runs stream (warm tier); without one, a poll.
  // A run not on the page that the stream names is counted as new when
  // this is the first page and it passes the page's filters; a button
  // then shows them (the table never jumps under the reader).
  const fresh = new Set();
  const banner = h('div', { 'aria-live': 'polite' });
  status.after(banner);
  const firstPage = !q.get('cursor') && !idq && !q.get('created_before') && q.get('stale') !== 'true';
  const passes = (r) => (!q.get('status') || r.status === q.get('status')) && (!q.get('workflow') || r.workflow_name === q.get('workflow'));
  const refreshRow = debounceByKey(async (id) => {
    const tr = body.querySelector(`tr[data-run="${CSS.escape(id)}"]`);
    if (!tr && (!firstPage || fresh.has(id))) return;
    let r;
    try { r = await api('GET', `/api/runs/${id}`); } catch { return; /* gone, or not ours */ }
    if (tr) { tr.replaceWith(rowOf(r)); return; }
    if (!passes(r) || (runs.length && r.created_at <= runs[0].created_at)) return;
    fresh.add(id);
    replace(banner, h('button', { type: 'button', class: 'primary', id: 'new-runs', onclick: () => render() },
      `${fresh.size} new run${fresh.size > 1 ? 's' : ''} — show`));
  }, 200);
  let poll = null;
  const startPoll = () => {
    if (poll) return;
    poll = setInterval(() => body.querySelectorAll('tr[data-run]').forEach((tr) => {
      if (!tr.querySelector('.s-succeeded, .s-failed, .s-cancelled')) refreshRow(tr.dataset.run);
    }), 3000);
  };
  onLeave(() => poll && clearInterval(poll));
  if (typeof EventSource === 'function') {
    const es = new EventSource('/api/live/runs');
    let opened = false;
    es.addEventListener('open', () => { opened = true; });
    es.addEventListener('run', (m) => {
      try { refreshRow(JSON.parse(m.data).run_id); } catch { /* not JSON */ }
    });
    es.addEventListener('error', () => { if (!opened || es.readyState === EventSource.CLOSED) { es.close(); startPoll(); } });
    onLeave(() => es.close());
  } else startPoll();
}
function localISO(v) {
  if (!v) return '';
  const d = new Date(v);
  if (isNaN(d)) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString();
}
function debounceByKey(fn, ms) {
  const timers = new Map();
  return (key) => {
    clearTimeout(timers.get(key));
    timers.set(key, setTimeout(() => { timers.delete(key); fn(key); }, ms));
  };
}

// ---- run detail ------------------------------------------------------

const defCache = new Map();
async function revisionOf(name, rev) {
  const k = `${name}@${rev}`;
  if (!defCache.has(k)) {
    defCache.set(k, api('GET', `/api/workflows/${enc(name)}/revisions/${enc(rev)}`).catch(async (e) => {
      if (e.status !== 404 && e.status !== 405) throw e;
      const cur = await api('GET', `/api/workflows/${enc(name)}`); // an older server: the current one
      return cur.revision === rev ? cur : null;
    }));
  }
  return defCache.get(k);
}
const specOf = (def) => (def && def.spec ? (typeof def.spec === 'string' ? JSON.parse(def.spec) : def.spec) : null);

async function pageRun(main, id) {
  loading(main, `Run ${short(id)}`);
  await meReady; // its actions depend on the role
  if (!me) { // sent to sign in, or /api/me failed
    if (main.isConnected) replace(main, errorBox(new Error('Could not tell who you are: GET /api/me failed. Reload the page.')));
    return;
  }
  const head = h('div', {});
  const stuckBox = h('div', {});
  const actions = h('div', {});
  const waitsBox = h('section', { 'aria-label': 'Waits' });
  const progressBox = h('div', { class: 'progress', 'aria-live': 'polite' });
  const graphBox = h('section', { 'aria-label': 'Graph' });
  const ganttBox = h('section', { 'aria-label': 'Timeline' });
  const ledgerBox = h('section', { 'aria-label': 'Step ledger' });
  const ioBox = h('section', { 'aria-label': 'Input and output' });
  const familyBox = h('section', { 'aria-label': 'Parent and child runs' });
  const eventsBox = h('section', { 'aria-label': 'Events' });
  let first = true;
  const seen = new Map(); // section → signature of what it shows
  const changed = (key, v) => { const s = typeof v === 'string' ? v : JSON.stringify(v); if (seen.get(key) === s) return false; seen.set(key, s); return true; };
  let run = null;

  async function load() {
    const [r, ledger, cps, waits, kids] = await Promise.all([
      api('GET', `/api/runs/${enc(id)}`),
      api('GET', `/api/runs/${enc(id)}/ledger`),
      api('GET', `/api/runs/${enc(id)}/checkpoints`).catch(() => ({ checkpoints: [] })),
      api('GET', `/api/runs/${enc(id)}/waits`).catch(() => ({ waits: [] })),
      api('GET', `/api/runs/${enc(id)}/children?limit=100`).catch(() => ({ runs: [] })),
    ]);
    run = r;
    id = r.id;
    const def = await revisionOf(r.workflow_name, r.workflow_revision).catch(() => null);
    const spec = specOf(def);
    document.title = `${r.workflow_name} ${short(r.id)} · Starflow`;
    if (first) {
      first = false;
      replace(main, head, stuckBox, actions, progressBox, waitsBox, graphBox, ganttBox, ledgerBox, ioBox, familyBox, eventsBox);
      if (main.isConnected && location.pathname !== `/runs/${r.id}`) history.replaceState(null, '', `/runs/${r.id}`);
    }
    if (changed('head', [r.status, r.attempt, r.phase, r.dead_lettered, r.cancel_requested, JSON.stringify(r.error || null), r.stuck, r.updated_at])) {
      renderHead(head, r);
      renderStuck(stuckBox, r);
      renderActions(actions, r, load);
    }
    const steps = ledger.steps || [];
    const events = ledger.events || [];
    const stepsSig = JSON.stringify(steps); // once: a ledger can hold thousands of rows
    if (changed('waits', waits.waits)) renderWaits(waitsBox, r, waits.waits || [], spec, load);
    if (changed('graph', `${spec && def.revision}|${stepsSig}`)) renderGraphSection(graphBox, spec, steps, r);
    if (changed('gantt', `${events.length}|${stepsSig}`)) renderGantt(ganttBox, steps, events, r);
    if (changed('ledger', `${(cps.checkpoints || []).length}|${stepsSig}`)) renderLedger(ledgerBox, steps, cps.checkpoints || []);
    if (changed('io', [r.input, r.output, JSON.stringify(r.error || null)])) renderIO(ioBox, r);
    if (changed('family', [r.parent_run_id, kids.runs])) renderFamily(familyBox, r, kids.runs || []);
    if (changed('events', events.length)) renderEvents(eventsBox, events);
    markReady(main, 'run', r.status);
  }
  await load();

  // Live: the run's stream (warm feed, or cold without one); every
  // message reloads what changed, progress reports are shown as they come.
  // One reload at a time: messages that come while one is in flight make
  // one more after it, and reloads are spaced by at least the time the
  // last one took (a run of thousands of steps has a ledger of megabytes;
  // overlapping reloads of it kept the page and the server busy).
  // Once the page shows the run settled, one more reload reads what
  // committed with its end (a ledger read beside the run's may have been
  // served just before it); after that nothing changes, and the stream's
  // remaining messages reload nothing.
  let timer = null; let inflight = false; let again = false; let took = 0; let left = false; let last = false;
  const reload = () => {
    if (left || last) return;
    if (inflight) { again = true; return; }
    if (timer) return;
    timer = setTimeout(async () => {
      timer = null; inflight = true;
      if (TERMINAL.has(run.status)) last = true;
      const t0 = performance.now();
      try { await load(); } catch (e) { replace(progressBox, errorBox(e)); }
      took = performance.now() - t0;
      inflight = false;
      if (again) { again = false; reload(); }
    }, Math.max(150, took));
  };
  onLeave(() => { left = true; if (timer) clearTimeout(timer); });
  if (typeof EventSource === 'function' && !TERMINAL.has(run.status)) {
    const es = new EventSource(`/api/live/runs/${enc(run.id)}`);
    const progress = new Map();
    // A step's progress reports (warm tier only) are drawn as they come.
    es.addEventListener('progress', (m) => {
      let p; try { p = JSON.parse(m.data); } catch { return; }
      progress.set(`${p.scope_path}/${p.step_id}`, p);
      replace(progressBox, h('div', { class: 'panel', id: 'progress' }, h('h3', {}, 'Step progress'), [...progress.values()].map((x) => {
        const f = Math.max(0, Math.min(1, Number(x.fraction) || 0));
        return h('div', { 'data-step': scoped(x.scope_path, x.step_id) }, h('strong', {}, scoped(x.scope_path, x.step_id)), ' ',
          h('progress', { max: 1, value: f }), ` ${Math.round(f * 100)}%`, x.message ? ` — ${x.message}` : '', h('span', { class: 'muted' }, ` (${fmtShort(x.at)})`));
      })));
    });
    es.addEventListener('event', () => reload());
    es.addEventListener('run', (m) => {
      reload();
      try { if (TERMINAL.has(JSON.parse(m.data).status)) es.close(); } catch { /* ignore */ }
    });
    es.addEventListener('error', () => { if (run && TERMINAL.has(run.status)) es.close(); });
    onLeave(() => es.close());
    // A slow safety net while the run goes: streams can end (server
    // restart); a settled run's page stops reloading.
    const t = setInterval(() => { if (TERMINAL.has(run.status)) clearInterval(t); else reload(); }, 5000);
    onLeave(() => clearInterval(t));
  }
}
const scoped = (scope, step) => (scope ? `${scope}/${step}` : step);

function renderHead(el, r) {
  replace(el,
    h('h1', {}, h('span', {}, link(`/definitions/${enc(r.workflow_name)}`, r.workflow_name)), h('span', { class: 'id muted', title: 'run id' }, r.id), runBadges(r)),
    h('div', { class: 'panel' }, h('dl', { class: 'kv' },
      kv('Status', r.status + (r.phase ? ` · phase ${r.phase}` : '')),
      kv('Attempt', `${r.attempt} of ${r.max_attempts} · recovery ${r.recovery_mode}`),
      kv('Revision', h('code', { title: r.workflow_revision }, r.workflow_revision.slice(0, 12))),
      kv('Trigger', r.trigger_type),
      r.runner_pool ? kv('Pool', r.runner_pool) : null,
      r.leased_by ? kv('Runner', `${r.leased_by} · epoch ${r.lease_epoch}${r.last_heartbeat ? ` · heartbeat ${ago(r.last_heartbeat)}` : ''}`) : null,
      kv('Created', fmtTime(r.created_at)),
      r.started_at ? kv('Started', fmtTime(r.started_at)) : null,
      r.completed_at ? kv('Completed', `${fmtTime(r.completed_at)} · ${r.attempt > 1 ? `attempt ${r.attempt} took` : 'took'} ${fmtDur(r.duration_ms)}${r.attempt > 1 && r.started_at ? ` (${fmtDur(new Date(r.completed_at) - new Date(r.started_at))} since the first start)` : ''}`) : null,
      r.error ? kv('Error', h('span', { class: 'mono' }, errorText(r.error))) : null,
      r.error && typeof r.error === 'object' ? kv('Error type', h('span', { class: 'mono', 'data-error-type': r.error.type }, errorWhere(r.error))) : null)));
}
function kv(k, v) { return [h('dt', {}, k), h('dd', {}, v)]; }

function renderStuck(el, r) {
  const s = r.stuck;
  if (!s) { replace(el); return; }
  const d = s.detail || {};
  const extra = [];
  if (d.child_run_id) extra.push(h('div', {}, 'Child run ', link(`/runs/${d.child_run_id}`, short(d.child_run_id)), d.child ? ` — ${stuckText(d.child)}` : ''));
  if (d.oldest_ahead) extra.push(h('div', {}, 'Oldest run ahead: ', link(`/runs/${d.oldest_ahead}`, short(d.oldest_ahead))));
  replace(el, h('div', { class: 'panel stuck', role: 'status', id: 'stuck', 'data-reason': s.reason },
    h('strong', {}, 'Why is it not moving? '), badge(s.reason.replace(/_/g, ' '), 'stuck'), ' ', stuckText(s),
    s.since ? h('span', { class: 'muted', title: fmtTime(s.since) }, ` — for ${ago(s.since).replace(' ago', '')} now`) : null, extra));
}

// Actions by role; the API refuses them anyway (403).
function renderActions(el, r, reload) {
  const out = h('div', { 'aria-live': 'polite' });
  const buttons = [];
  const act = async (label, method, path, body) => {
    replace(out, h('span', { class: 'muted' }, `${label}…`));
    try {
      await api(method, path, body);
      replace(out, h('div', { class: 'notice info' }, `${label}: done.`));
      await reload();
    } catch (e) { replace(out, explain409(e)); }
  };
  const confirmThen = (label, cls, fn) => {
    const b = h('button', { type: 'button', class: cls, onclick: () => {
      replace(out, h('span', {}, `${label}? `,
        h('button', { type: 'button', class: cls, onclick: fn, id: 'confirm' }, `Yes, ${label.toLowerCase()}`), ' ',
        h('button', { type: 'button', onclick: () => replace(out) }, 'No')));
      $('#confirm').focus();
    } }, label);
    buttons.push(b);
  };
  if (can('operator') && !TERMINAL.has(r.status) && !r.cancel_requested) {
    confirmThen('Cancel run', 'danger', () => act('Cancel', 'POST', `/api/runs/${r.id}/cancel`));
  }
  if (can('operator') && ['failed', 'cancelled', 'succeeded', 'interrupted'].includes(r.status)) {
    confirmThen('Retrigger', '', () => act('Retrigger', 'POST', `/api/runs/${r.id}/retrigger`));
  }
  let resumeForm = null;
  if (can('admin') && ['interrupted', 'failed', 'cancelled'].includes(r.status)) {
    resumeForm = h('form', { class: 'actions', 'aria-label': 'Resume', onsubmit: (ev) => {
      ev.preventDefault();
      const f = new FormData(resumeForm);
      act('Resume', 'POST', `/api/runs/${r.id}/resume`, { mode: f.get('mode'), revision: f.get('revision') });
    } },
    h('label', {}, 'Mode', h('select', { name: 'mode' }, h('option', { value: 'resume' }, 'resume (keep committed steps)'), h('option', { value: 'replay' }, 'replay (start over)'))),
    h('label', {}, 'Revision', h('select', { name: 'revision' }, h('option', { value: 'pinned' }, 'pinned (this run\'s)'), h('option', { value: 'current' }, 'current (newest applied)'))),
    h('button', { type: 'submit', class: 'primary', id: 'resume' }, 'Resume'),
    h('span', { class: 'muted' }, 'restarts the run: resume keeps the steps it committed, replay runs them again'));
  }
  if (!buttons.length && !resumeForm) { replace(el); return; }
  replace(el, h('div', { class: 'panel' }, h('h2', { style: null }, 'Actions'), h('div', { class: 'actions' }, buttons), resumeForm, out));
}
function explain409(e) {
  const why = {
    revision_mismatch: 'The revision chosen changed or removed a step this run already completed, so its checkpoints do not fit: resume it on its pinned revision, or replay it from the start.',
    no_checkpoint: 'Nothing was committed to resume from: replay the run instead.',
    conflict: 'The run is not in a state this action applies to (it is queued, running or already finished): reload and look at its status.',
  }[e.code];
  return h('div', { class: 'notice error', role: 'alert' }, e.message, why ? h('div', {}, why) : null);
}

// Pending waits: what each waits for; a signal form, or the approval's
// rendered form.
// sentNotice remembers, per run, the answer this page sent last, so the
// confirmation outlives the form (which goes once its wait is woken).
const sentNotice = new Map();
function renderWaits(el, r, waits, spec, reload) {
  const pending = waits.filter((w) => w.status === 'pending');
  if (!waits.length) { replace(el); return; }
  const rows = waits.map((w) => h('tr', {},
    h('td', {}, scoped(w.scope_path, w.step_id)), h('td', {}, w.kind), h('td', {}, badge(w.status)),
    h('td', {}, waitFor(w)), h('td', {}, fmtTime(w.created_at)), h('td', {}, w.expires_at ? fmtTime(w.expires_at) : ''),
    h('td', { class: 'mono' }, w.status !== 'pending' && w.payload !== undefined ? `${JSON.stringify(w.payload).slice(0, 200)}${w.consumed_at ? ` at ${fmtShort(w.consumed_at)}` : ''}` : '')));
  const answerable = pending.filter((w) => w.kind === 'signal' || w.kind === 'approval');
  const forms = can('operator') ? answerable.map((w) => (w.kind === 'approval' ? approvalForm(r, w, spec, reload) : signalForm(r, w, reload)))
    : (answerable.length ? [h('p', { class: 'muted' }, 'Answering a wait needs an operator key: sign in with one to approve or signal.')] : []);
  const sent = sentNotice.get(r.id);
  replace(el, h('h2', {}, 'Waits'), sent ? h('div', { class: 'notice info', role: 'status' }, sent) : null, h('div', { class: 'table-wrap' }, h('table', {},
    h('thead', {}, h('tr', {}, ['Step', 'Kind', 'Status', 'Waits for', 'Since', 'Expires', 'Answer'].map((c) => h('th', {}, c)))),
    h('tbody', {}, rows))), forms);
}
function waitFor(w) {
  switch (w.kind) {
    case 'timer': return `the time ${fmtTime(w.wake_at)} (${ago(w.wake_at)})`;
    case 'child': return h('span', {}, 'child run ', w.correlation_key ? link(`/runs/${w.correlation_key}`, short(w.correlation_key)) : '');
    case 'approval': return `approval (signal ${w.signal})`;
    case 'job': return `a remote worker of job type ${String(w.signal || '').replace(/^starflow\.job:/, '')}`;
    default: return `signal ${w.signal}${w.correlation_key ? ` · key ${w.correlation_key}` : ''}`;
  }
}
function findStep(steps, id) {
  for (const s of steps || []) {
    if (s.id === id) return s;
    for (const list of childLists(s)) { const f = findStep(list.steps, id); if (f) return f; }
  }
  return null;
}
// formFields normalises an approval form's fields: {name: "type"},
// {name: {type, label, required, enum, description}} or a list of
// {name, type, label, required}; form.required may list names. The form
// is the definition's (rendered from the run's data): fields that are
// not an object or a list, entries without a name, and labels or help
// that are not text are left out rather than drawn as junk.
const textOf = (v) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
function formFields(form) {
  const req = new Set(Array.isArray(form.required) ? form.required : []);
  let fields = form.fields;
  if (Array.isArray(fields)) fields = fields.filter((f) => f && typeof f === 'object' && typeof f.name === 'string').map((f) => [f.name, f]);
  else if (fields && typeof fields === 'object') fields = Object.entries(fields);
  else fields = [];
  return fields.filter(([name]) => name !== '').map(([name, f]) => {
    const o = typeof f === 'string' ? { type: f } : (f && typeof f === 'object' && !Array.isArray(f) ? f : { type: 'string' });
    const options = Array.isArray(o.enum) ? o.enum : (Array.isArray(o.options) ? o.options : null);
    return { name, type: String(o.type || 'string'), label: textOf(o.label) || textOf(o.title) || name, required: o.required === true || req.has(name),
      options, multiline: o.multiline === true, help: textOf(o.description) || textOf(o.help) };
  });
}
function approvalForm(r, w, spec, reload) {
  let form = w.form;
  if (!form && spec) { const s = findStep(spec.steps, w.step_id); form = s && s.wait && s.wait.approval && s.wait.approval.form; }
  form = form && typeof form === 'object' && !Array.isArray(form) ? form : {};
  const fields = formFields(form);
  const out = h('div', { 'aria-live': 'polite' });
  // Each field's value is read from the controls drawn for it (never
  // looked up by name on the form: a field named "elements" or "submit"
  // would shadow the form's own properties).
  const values = [];
  const inputs = fields.map((f, i) => {
    const id = `f-${w.id}-${i}`;
    const help = f.help ? h('span', { class: 'muted' }, ` — ${f.help}`) : null;
    let input;
    if (f.options) {
      input = h('select', { id, name: f.name, required: f.required }, f.required ? null : h('option', { value: '' }, '—'),
        f.options.map((o) => h('option', { value: JSON.stringify(o) ?? 'null' }, o !== null && typeof o === 'object' ? JSON.stringify(o) : String(o))));
      values.push([f.name, () => (input.value === '' ? undefined : JSON.parse(input.value))]);
    } else if (f.type === 'boolean') {
      // A yes/no is asked, never defaulted: two radios (a checkbox left
      // unticked would answer no by a slip); a required one must be chosen,
      // an optional one left unanswered is left out of the payload.
      const name = `${id}-yn`;
      const yes = h('input', { type: 'radio', name, value: 'true', required: f.required, id, 'data-field': f.name });
      const no = h('input', { type: 'radio', name, value: 'false', required: f.required, 'data-field': f.name });
      values.push([f.name, () => (yes.checked ? true : no.checked ? false : undefined)]);
      return h('fieldset', { class: 'yesno' }, h('legend', {}, f.label, f.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null, help),
        h('label', { class: 'inline' }, yes, 'Yes'), h('label', { class: 'inline' }, no, 'No'));
    } else if (f.type === 'number' || f.type === 'integer') {
      input = h('input', { type: 'number', id, name: f.name, required: f.required, step: f.type === 'integer' ? '1' : 'any' });
      values.push([f.name, () => (input.value === '' ? undefined : Number(input.value))]);
    } else {
      input = f.type === 'text' || f.multiline ? h('textarea', { id, name: f.name, required: f.required }) : h('input', { type: 'text', id, name: f.name, required: f.required });
      values.push([f.name, () => (input.value !== '' || f.required ? input.value : undefined)]);
    }
    return h('label', { for: id }, h('span', {}, f.label, f.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null, help), input);
  });
  const el = h('form', { class: 'panel form-approval', 'aria-label': `Approve ${w.step_id}`, 'data-wait': w.id, onsubmit: async (ev) => {
    ev.preventDefault();
    const payload = Object.create(null); // a field may be named __proto__
    for (const [name, get] of values) {
      const v = get();
      if (v !== undefined) payload[name] = v;
    }
    replace(out, h('span', { class: 'muted' }, 'Sending…'));
    try {
      await api('POST', `/api/runs/${r.id}/signal`, { name: w.signal, payload });
      sentNotice.set(r.id, `Sent to ${w.step_id}: ${JSON.stringify(payload)}`);
      replace(out, h('div', { class: 'notice info' }, 'Sent.'));
      await reload();
    } catch (e) { replace(out, errorBox(e)); }
  } },
  h('h3', {}, textOf(form.title) || `Approval: ${w.step_id}`),
  textOf(form.description) ? h('p', {}, textOf(form.description)) : null,
  inputs,
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, textOf(form.submit) || 'Submit')), out);
  return el;
}
function signalForm(r, w, reload) {
  const out = h('div', { 'aria-live': 'polite' });
  const ta = h('textarea', { name: 'payload', 'aria-label': 'Payload (JSON)', placeholder: '{"ok": true}' });
  const el = h('form', { class: 'panel', 'aria-label': `Signal ${w.signal}`, onsubmit: async (ev) => {
    ev.preventDefault();
    let payload = null;
    if (ta.value.trim()) {
      try { payload = JSON.parse(ta.value); } catch (e) { replace(out, errorBox(new Error(`The payload is not JSON: ${e.message}`))); return; }
    }
    try {
      await api('POST', `/api/runs/${r.id}/signal`, { name: w.signal, payload });
      replace(out, h('div', { class: 'notice info' }, 'Signal sent.'));
      await reload();
    } catch (e) { replace(out, errorBox(e)); }
  } }, h('h3', {}, `Send signal ${w.signal} to ${scoped(w.scope_path, w.step_id)}`), ta,
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send signal')), out);
  return el;
}

// ---- the graph -------------------------------------------------------

function kindOf(s) {
  for (const k of KINDS) if (s[k] !== undefined) return k;
  for (const k of Object.keys(s)) if (!COMMON.has(k)) return k; // a custom step type
  return 'step';
}
// childLists are a construct's nested steps lists, for searching.
function childLists(s) {
  const out = [];
  if (s.if) { out.push({ steps: s.if.then }); if (s.if.else) out.push({ steps: s.if.else }); }
  if (s.try) { out.push({ steps: s.try.steps }); if (s.try.catch) out.push({ steps: s.try.catch }); if (s.try.finally) out.push({ steps: s.try.finally }); }
  if (s.repeat_until) out.push({ steps: s.repeat_until.steps });
  if (s.for_each) out.push({ steps: s.for_each.steps });
  if (s.parallel) for (const l of Object.keys(s.parallel.lanes || {}).sort()) out.push({ steps: s.parallel.lanes[l] });
  return out;
}
const join = (scope, part) => (scope ? `${scope}/${part}` : part);

// rowsBy indexes ledger rows by scope|step, the latest attempt winning.
function rowsBy(steps) {
  const m = new Map();
  for (const s of steps) {
    const k = `${s.scope_path}|${s.step_id}`;
    const cur = m.get(k);
    if (!cur || s.attempt > cur.attempt || (s.attempt === cur.attempt && (s.started_at || '') >= (cur.started_at || ''))) m.set(k, s);
  }
  return m;
}
// instances lists the loop scopes found in the ledger under scope/id.<what>_N.
function instances(steps, scope, id, what) {
  const prefix = join(scope, `${id}.${what}_`);
  const found = new Set();
  for (const s of steps) {
    if (!s.scope_path.startsWith(prefix)) continue;
    const m = s.scope_path.slice(prefix.length).match(/^(\d+)/);
    if (m) found.add(Number(m[1]));
  }
  return [...found].sort((a, b) => a - b);
}

function renderGraphSection(el, spec, steps, r) {
  if (!spec) { replace(el, h('h2', {}, 'Graph'), h('p', { class: 'muted' }, 'The definition of this revision is not readable.')); return; }
  const g = h('div', { class: 'graph', id: 'graph' });
  replace(el, h('h2', {}, 'Graph'),
    h('div', { class: 'legend' }, ['succeeded', 'running', 'waiting', 'failed', 'skipped'].map((s) => badge(s)), badge('not reached', 'none')),
    g);
  drawGraph(g, spec, steps);
}
// drawGraph draws spec's steps into el, coloured by the ledger rows
// (steps: [] draws the definition alone).
function drawGraph(el, spec, steps) {
  const by = rowsBy(steps || []);
  const ctx = { by, steps: steps || [], edges: [] };
  replace(el, drawList(spec.steps || [], '', ctx));
  requestAnimationFrame(() => drawEdges(el, ctx.edges));
}
function statusOf(ctx, scope, id) {
  const row = ctx.by.get(`${scope}|${id}`);
  return row ? row.status : 'pending';
}
function drawList(list, scope, ctx) {
  const dag = list.some((s) => Array.isArray(s.run_after));
  if (!dag) return h('div', { class: 'g-list seq' }, list.map((s) => drawNode(s, scope, ctx)));
  // A run_after graph: levels by longest path; edges drawn over it.
  const level = new Map();
  list.forEach((s, i) => {
    const deps = Array.isArray(s.run_after) ? s.run_after : (i > 0 ? [list[i - 1].id] : []);
    level.set(s.id, deps.reduce((m, d) => Math.max(m, (level.get(d) ?? 0) + 1), 0));
    deps.forEach((d) => ctx.edges.push([`${scope}|${d}`, `${scope}|${s.id}`]));
  });
  const levels = [];
  list.forEach((s) => { const l = level.get(s.id); (levels[l] = levels[l] || []).push(s); });
  return h('div', { class: 'g-list' }, levels.filter(Boolean).map((ls) => h('div', { class: 'g-level' }, ls.map((s) => drawNode(s, scope, ctx)))));
}
function drawNode(s, scope, ctx) {
  const kind = kindOf(s);
  const st = statusOf(ctx, scope, s.id);
  const row = ctx.by.get(`${scope}|${s.id}`);
  const key = `${scope}|${s.id}`;
  const meta = [kind];
  if (row && row.tries > 1) meta.push(`tries ${row.tries}`);
  if (row && row.duration_ms) meta.push(fmtDur(row.duration_ms));
  const title = `${scoped(scope, s.id)} · ${kind} · ${st}${row && row.error ? ' · ' + row.error : ''}`;
  const branch = (label, sub, list) => {
    const bst = sub === null ? 'pending' : branchStatus(ctx, sub);
    return h('div', { class: `g-branch st-${bst}`, 'data-scope': sub || '' }, h('div', { class: 'g-label' }, label, sub ? h('span', { class: 'mono' }, ` · ${sub}`) : null), drawList(list || [], sub || scope, ctx));
  };
  let body = null;
  if (s.parallel) {
    body = h('div', { class: 'g-branches' }, Object.keys(s.parallel.lanes || {}).sort().map((l) => branch(`lane ${l}`, join(scope, `${s.id}.lane_${l}`), s.parallel.lanes[l])));
  } else if (s.for_each || s.repeat_until) {
    const what = s.for_each ? 'item' : 'iter';
    const list = s.for_each ? s.for_each.steps : s.repeat_until.steps;
    const found = instances(ctx.steps, scope, s.id, what);
    if (!found.length) body = h('div', { class: 'g-branches' }, branch(s.for_each ? 'each item (none yet)' : 'each iteration (none yet)', null, list));
    else {
      const shown = found.slice(0, ITEMS_SHOWN);
      body = h('div', { class: 'g-branches' }, shown.map((n) => branch(`${what === 'item' ? 'item' : 'iteration'} ${n}`, join(scope, `${s.id}.${what}_${n}`), list)),
        found.length > shown.length ? h('div', { class: 'muted' }, `… ${found.length - shown.length} more (the ledger lists them all)`) : null);
    }
  } else if (s.if) {
    body = h('div', { class: 'g-branches' }, branch('then', scope, s.if.then), s.if.else ? branch('else', scope, s.if.else) : null);
  } else if (s.try) {
    body = h('div', { class: 'g-branches' }, branch('steps', scope, s.try.steps), s.try.catch ? branch('catch', scope, s.try.catch) : null, s.try.finally ? branch('finally', scope, s.try.finally) : null);
  }
  if (!body) {
    const child = kind === 'workflow_call' ? (s.workflow_call.workflow || '') : '';
    return h('div', { class: `g-node g-step st-${st}`, 'data-key': key, 'data-status': st, title, 'aria-label': title },
      h('div', { class: 'g-id' }, s.id), h('div', { class: 'g-meta' }, meta.join(' · '), child ? ` → ${child}` : ''));
  }
  return h('div', { class: `g-node g-group st-${st}`, 'data-key': key, 'data-status': st, title },
    h('div', { class: 'g-head' }, h('span', { class: 'g-id' }, s.id), badge(kind, st === 'pending' ? 'none' : st), meta.length > 1 ? h('span', { class: 'muted' }, meta.slice(1).join(' · ')) : null), body);
}
// branchStatus summarises the rows under a loop item / lane scope.
function branchStatus(ctx, sub) {
  const sts = new Set();
  for (const s of ctx.steps) if (s.scope_path === sub || s.scope_path.startsWith(sub + '/')) sts.add(s.status);
  for (const st of ['failed', 'running', 'waiting', 'cancelled']) if (sts.has(st)) return st;
  return sts.size ? 'succeeded' : 'pending';
}
function drawEdges(el, edges) {
  el.querySelectorAll('svg.g-edges').forEach((s) => s.remove());
  if (!edges.length) return;
  const box = el.getBoundingClientRect();
  const svg = h('svg:svg', { class: 'g-edges', width: el.scrollWidth, height: el.scrollHeight, 'aria-hidden': 'true' });
  for (const [from, to] of edges) {
    const a = el.querySelector(`[data-key="${CSS.escape(from)}"]`);
    const b = el.querySelector(`[data-key="${CSS.escape(to)}"]`);
    if (!a || !b) continue;
    const ra = a.getBoundingClientRect(); const rb = b.getBoundingClientRect();
    const x1 = ra.left + ra.width / 2 - box.left + el.scrollLeft; const y1 = ra.bottom - box.top + el.scrollTop;
    const x2 = rb.left + rb.width / 2 - box.left + el.scrollLeft; const y2 = rb.top - box.top + el.scrollTop;
    const my = (y1 + y2) / 2;
    svg.appendChild(h('svg:path', { d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2 - 5}` }));
    svg.appendChild(h('svg:polygon', { points: `${x2 - 4},${y2 - 7} ${x2 + 4},${y2 - 7} ${x2},${y2}` }));
  }
  el.appendChild(svg);
}

// ---- the timeline (Gantt of step instances) -------------------------

// capped is the first n of list, then those of the rest keep() wants (n
// at most, in list order): a long ledger's first rows and its failures.
function capped(list, n, keep) {
  if (list.length <= n) return list;
  const out = list.slice(0, n);
  for (let i = n; i < list.length && out.length < 2 * n; i++) if (keep(list[i])) out.push(list[i]);
  return out;
}
const notable = (s) => !['succeeded', 'skipped'].includes(s.status);
const GANTT_ROWS = 300; // bars drawn; the ledger lists every row
const LEDGER_ROWS = 200; // ledger rows drawn before "Show all"
const EVENT_ROWS = 500; // events drawn before "Show all"

function renderGantt(el, steps, events, r) {
  const all = steps.filter((s) => s.started_at).sort((a, b) => a.attempt - b.attempt || (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : 0));
  if (!all.length) { replace(el, h('h2', {}, 'Timeline'), h('p', { class: 'muted' }, 'No step has started yet.')); return; }
  const rows = capped(all, GANTT_ROWS, notable);
  const t = (v) => new Date(v).getTime();
  const now = Date.now();
  const end = (s) => (s.finished_at ? t(s.finished_at) : (TERMINAL.has(r.status) ? t(s.updated_at || s.started_at) : now));
  let t0 = Infinity; let t1 = -Infinity; // over every row: the axis spans the whole run
  for (const s of all) { t0 = Math.min(t0, t(s.started_at)); t1 = Math.max(t1, end(s)); }
  t1 = Math.max(t1, t0 + 1);
  const W = 1000; const label = 260; const H = 18; const top = 22;
  const x = (v) => label + ((v - t0) / (t1 - t0)) * (W - label - 10);
  const retries = new Map();
  for (const e of events) if (e.event_type === 'node_retry') {
    const k = `${e.attempt}|${e.scope_path}|${e.node_id}`;
    (retries.get(k) || retries.set(k, []).get(k)).push(t(e.created_at));
  }
  const svg = h('svg:svg', { class: 'gantt', viewBox: `0 0 ${W} ${top + rows.length * (H + 4) + 6}`, role: 'img', 'aria-label': 'Timeline of step instances' },
    h('svg:line', { class: 'axis', x1: label, x2: label, y1: 0, y2: top + rows.length * (H + 4) }),
    h('svg:text', { x: label, y: 12 }, fmtTime(new Date(t0).toISOString())),
    h('svg:text', { x: W - 10, y: 12, 'text-anchor': 'end' }, `+${fmtDur(t1 - t0)}`),
    rows.map((s, i) => {
      const y = top + i * (H + 4);
      const x1 = x(t(s.started_at)); const x2 = Math.max(x1 + 2, x(end(s)));
      const name = `${s.attempt > 1 ? `#${s.attempt} ` : ''}${scoped(s.scope_path, s.step_id)}`;
      return h('svg:g', {},
        h('svg:title', {}, `${name} · ${s.status} · tries ${s.tries} · ${fmtDur(s.duration_ms || (end(s) - t(s.started_at)))}`),
        h('svg:text', { x: 4, y: y + 13 }, name.length > 36 ? '…' + name.slice(-35) : name),
        h('svg:rect', { class: `b-${s.status}`, x: x1, y, width: x2 - x1, height: H, rx: 3 }),
        h('svg:text', x2 > W - 110 ? { x: x1 - 4, y: y + 13, 'text-anchor': 'end' } : { x: x2 + 4, y: y + 13 }, `${fmtDur(s.duration_ms || (end(s) - t(s.started_at)))}${s.tries > 1 ? ` · ${s.tries} tries` : ''}`),
        (retries.get(`${s.attempt}|${s.scope_path}|${s.step_id}`) || []).map((rt) => h('svg:line', { class: 'retry', x1: x(rt), x2: x(rt), y1: y - 1, y2: y + H + 1 })));
    }));
  const more = all.length - rows.length;
  replace(el, h('h2', {}, 'Timeline'), h('div', { class: 'panel' }, svg, h('div', { class: 'muted' },
    'Bars are step instances (every attempt), red ticks their retries.',
    more ? ` ${rows.length} of ${all.length} shown: the first ${GANTT_ROWS} to start and every one that did not succeed; the step ledger lists all.` : '')));
}

// ---- the ledger, with the context and output after each step --------

function renderLedger(el, steps, cps) {
  const cp = new Map(cps.map((c) => [`${c.attempt}|${c.scope_path}|${c.step_id}`, c]));
  const open = new Set([...el.querySelectorAll('details[open]')].map((d) => d.dataset.key));
  // A long ledger draws its first rows and every one that did not
  // succeed; "Show all" (kept while the page updates) draws the rest.
  const shown = el.dataset.all ? steps : capped(steps, LEDGER_ROWS, notable);
  const rows = shown.map((s) => {
    const k = `${s.attempt}|${s.scope_path}|${s.step_id}`;
    const c = cp.get(k);
    return h('tr', {},
      h('td', {}, s.attempt), h('td', { class: 'mono' }, s.scope_path || '—'), h('td', {}, s.step_id), h('td', {}, s.kind),
      h('td', {}, badge(s.status)), h('td', {}, s.tries), h('td', { title: s.started_at }, fmtTime(s.started_at)),
      h('td', {}, s.finished_at || TERMINAL.has(s.status) || s.status === 'skipped' ? fmtDur(s.duration_ms) : (s.started_at ? `${ago(s.started_at).replace(' ago', '')} so far` : '')),
      h('td', {}, s.error ? h('div', { class: 'mono' }, s.error) : null,
        c ? h('details', { 'data-key': k, open: open.has(k) }, h('summary', {}, 'context and output after it'),
          h('div', { class: 'muted' }, 'Context keys it set (masked):'), h('pre', {}, json(c.context)),
          h('div', { class: 'muted' }, 'Output:'), h('pre', {}, json(c.output))) : null));
  });
  const more = steps.length - shown.length;
  replace(el, h('h2', {}, 'Step ledger'), h('div', { class: 'table-wrap' }, h('table', { id: 'ledger' },
    h('thead', {}, h('tr', {}, ['Attempt', 'Scope path', 'Step', 'Kind', 'Status', 'Tries', 'Started', 'Duration', 'Error / checkpoint'].map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No step has started.'))))),
  more ? h('p', { class: 'muted' }, `${shown.length} of ${steps.length} rows: the first ${LEDGER_ROWS} and every one that did not succeed. `,
    h('button', { type: 'button', id: 'ledger-all', onclick: () => { el.dataset.all = '1'; renderLedger(el, steps, cps); } }, `Show all ${steps.length}`)) : null);
}
function renderIO(el, r) {
  replace(el, h('h2', {}, 'Input and output'), h('div', { class: 'grid2' },
    h('div', { class: 'panel' }, h('h3', {}, 'Input'), h('pre', {}, json(r.input))),
    h('div', { class: 'panel' }, h('h3', {}, 'Output'), r.output !== undefined ? h('pre', {}, json(r.output))
      : h('p', { class: 'muted' }, TERMINAL.has(r.status) ? `None: the run ${r.status}${r.error ? ' (its error is above)' : ''}.` : 'Not yet.'))));
}
function renderFamily(el, r, kids) {
  if (!r.parent_run_id && !kids.length) { replace(el); return; }
  replace(el, h('h2', {}, 'Parent and child runs'), h('div', { class: 'panel' },
    r.parent_run_id ? h('div', {}, 'Parent: ', link(`/runs/${r.parent_run_id}`, h('span', { class: 'id' }, r.parent_run_id))) : null,
    kids.length ? h('ul', {}, kids.map((k) => h('li', {}, link(`/runs/${k.id}`, h('span', { class: 'id' }, short(k.id))), ` ${k.workflow_name} `, runBadges(k)))) : null));
}
function renderEvents(el, events) {
  // The table is drawn when it is opened (a long run has thousands of
  // events): the newest EVENT_ROWS, or all after "Show all".
  const wasOpen = !!el.querySelector('details[open]');
  const body = h('div', {});
  const draw = () => {
    const shown = el.dataset.all ? events : events.slice(-EVENT_ROWS);
    replace(body, shown.length < events.length ? h('p', { class: 'muted' }, `The ${shown.length} newest of ${events.length} events. `,
      h('button', { type: 'button', id: 'events-all', onclick: () => { el.dataset.all = '1'; draw(); } }, `Show all ${events.length}`)) : null,
    h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['#', 'Time', 'Attempt', 'Event', 'Step', 'Payload'].map((c) => h('th', {}, c)))),
      h('tbody', {}, shown.map((e) => h('tr', {}, h('td', {}, e.id), h('td', {}, fmtTime(e.created_at)), h('td', {}, e.attempt), h('td', {}, e.event_type),
        h('td', { class: 'mono' }, e.node_id ? scoped(e.scope_path, e.node_id) : ''), h('td', { class: 'mono' }, e.payload !== undefined ? JSON.stringify(e.payload).slice(0, 300) : '')))))));
  };
  const d = h('details', { open: wasOpen, ontoggle: () => { if (d.open && !body.firstChild) draw(); } }, h('summary', {}, h('strong', {}, `Events (${events.length})`)), body);
  if (wasOpen) draw();
  replace(el, d);
}

// ---- definitions -----------------------------------------------------

async function pageDefinitions(main) {
  document.title = 'Definitions · Starflow';
  loading(main, 'Definitions');
  const list = (await api('GET', '/api/workflows')).workflows || [];
  replace(main, h('h1', {}, 'Definitions'),
    list.length ? h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Workflow', 'Current revision', 'Applied'].map((c) => h('th', {}, c)))),
      h('tbody', {}, list.map((d) => h('tr', {}, h('td', {}, link(`/definitions/${enc(d.name)}`, d.name)), h('td', { class: 'mono' }, d.revision.slice(0, 12)), h('td', {}, fmtTime(d.created_at)))))))
      : h('p', { class: 'muted' }, 'No workflow is applied. ', h('code', {}, 'starflow apply FILE'), ' or PUT /api/workflows/{name}.'));
  markReady(main, 'definitions');
}
async function pageDefinition(main, name) {
  document.title = `${name} · Definitions · Starflow`;
  loading(main, name);
  const revs = (await api('GET', `/api/workflows/${enc(name)}/revisions`)).revisions || [];
  const q = new URLSearchParams(location.search);
  const want = q.get('revision') || (revs[0] && revs[0].revision);
  const def = await revisionOf(name, want);
  const spec = specOf(def);
  const graph = h('div', { class: 'graph' });
  const planOut = h('div', { 'aria-live': 'polite' });
  const src = h('textarea', { 'aria-label': 'New revision source (YAML or JSON)', rows: 10, placeholder: 'Paste the new revision\'s YAML to see which in-flight runs it would strand.' });
  replace(main, h('h1', {}, name, link(`/runs?workflow=${enc(name)}`, 'its runs')),
    h('h2', {}, 'Revisions'),
    h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Revision', 'Applied', ''].map((c) => h('th', {}, c)))),
      h('tbody', {}, revs.map((d, i) => h('tr', {}, h('td', { class: 'mono' }, d.revision), h('td', {}, fmtTime(d.created_at)),
        h('td', {}, d.revision === want ? badge(i === 0 ? 'current · shown' : 'shown', 'running') : link(`/definitions/${enc(name)}?revision=${d.revision}`, i === 0 ? 'current — show' : 'show'))))))),
    h('h2', {}, 'Graph'), spec ? graph : h('p', { class: 'muted' }, 'This revision is not readable.'),
    h('h2', {}, 'Source'), h('pre', { id: 'source' }, def ? def.source || json(spec) : ''),
    h('h2', {}, 'Plan a new revision'),
    h('form', { class: 'panel', onsubmit: async (ev) => {
      ev.preventDefault();
      replace(planOut, h('span', { class: 'muted' }, 'Planning…'));
      try {
        const p = await api('POST', `/api/workflows/${enc(name)}/plan`, src.value, { raw: true, type: src.value.trim().startsWith('{') ? 'application/json' : 'application/yaml' });
        replace(planOut, planView(p));
      } catch (e) { replace(planOut, errorBox(e)); }
    } }, src, h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Plan (writes nothing)')), planOut));
  if (spec) { graph.classList.add('plain'); drawGraph(graph, spec, []); }
  markReady(main, 'definition');
}
function planView(p) {
  const runs = (list, what) => (list && list.length ? h('table', {}, h('thead', {}, h('tr', {}, ['Run', 'Status', 'Revision', 'Reason'].map((c) => h('th', {}, c)))),
    h('tbody', {}, list.map((r) => h('tr', {}, h('td', {}, link(`/runs/${r.run_id}`, short(r.run_id))), h('td', {}, badge(r.status)), h('td', { class: 'mono' }, r.revision.slice(0, 12)), h('td', {}, r.reason || '')))))
    : h('p', { class: 'muted' }, `No run ${what}.`));
  return h('div', {},
    h('p', {}, p.changed ? `New revision ${p.new_revision.slice(0, 12)} (current ${p.current_revision ? p.current_revision.slice(0, 12) : 'none'}).` : 'This is exactly the current revision.'),
    h('h3', {}, 'Runs that could move onto it'), runs(p.movable, 'could move'),
    h('h3', {}, 'Runs it would strand'), runs(p.blocked, 'would be stranded'));
}

// ---- dead letters ----------------------------------------------------

async function pageDeadLetters(main) {
  document.title = 'Dead letters · Starflow';
  loading(main, 'Dead letters');
  await meReady; // redrive depends on the role
  const q = new URLSearchParams(location.search);
  const page = await api('GET', `/api/dead-letters?limit=50${q.get('cursor') ? '&cursor=' + enc(q.get('cursor')) : ''}`);
  const runs = page.runs || [];
  const out = h('div', { 'aria-live': 'polite' });
  replace(main, h('h1', {}, 'Dead letters'),
    h('p', { class: 'muted' }, 'Runs that used every attempt. Redrive gives one a fresh set of attempts from its first step.'), out,
    runs.length ? h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Run', 'Workflow', 'Status', 'Attempts', 'Error', 'Ended', ''].map((c) => h('th', {}, c)))),
      h('tbody', {}, runs.map((r) => h('tr', { 'data-run': r.id },
        h('td', {}, link(`/runs/${r.id}`, h('span', { class: 'id' }, short(r.id)))), h('td', {}, r.workflow_name), h('td', {}, runBadges(r)),
        h('td', {}, `${r.attempt}/${r.max_attempts}`), h('td', { class: 'mono' }, errorText(r.error).slice(0, 200)), h('td', {}, fmtTime(r.completed_at || r.updated_at)),
        h('td', {}, can('operator') ? h('button', { type: 'button', onclick: async (ev) => {
          ev.target.disabled = true;
          try { await api('POST', `/api/dead-letters/${r.id}/redrive`); replace(out, h('div', { class: 'notice info' }, `Run ${short(r.id)} redriven.`)); ev.target.closest('tr').remove(); }
          catch (e) { ev.target.disabled = false; replace(out, errorBox(e)); }
        } }, 'Redrive') : null))))))
      : h('p', {}, 'No dead-lettered run.'),
    page.next_cursor ? h('div', { class: 'pager' }, link(`/dead-letters?cursor=${enc(page.next_cursor)}`, 'Older →')) : null);
  markReady(main, 'dead-letters');
}

// ---- schedules -------------------------------------------------------

// pageSchedules lists the definitions' schedules (GET /api/schedules):
// cron, zone, overlap, catchup, state, next fire times, last tick and run,
// with Pause and Resume per workflow for an operator.
async function pageSchedules(main) {
  document.title = 'Schedules · Starflow';
  loading(main, 'Schedules');
  await meReady; // pause and resume depend on the role
  const out = h('div', { 'aria-live': 'polite' });
  const draw = async () => {
    const list = (await api('GET', '/api/schedules?next=3')).schedules || [];
    const workflows = [...new Set(list.map((s) => s.workflow))];
    const act = (wf, verb) => h('button', { type: 'button', 'data-action': verb, 'data-workflow': wf, onclick: async (ev) => {
      ev.target.disabled = true;
      try {
        await api('POST', `/api/schedules/${enc(wf)}/${verb}`);
        await draw();
        replace(out, h('div', { class: 'notice info' }, `The schedules of ${wf} are ${verb === 'pause' ? 'paused' : 'running again'}.`));
      } catch (e) { ev.target.disabled = false; replace(out, errorBox(e)); }
    } }, verb === 'pause' ? 'Pause' : 'Resume');
    replace(main, h('h1', {}, 'Schedules'),
      h('p', { class: 'muted' }, 'Runs the definitions start on their own, one per tick across every process. Overlap says what a tick does while the previous run goes on; catchup what happens to ticks missed while no process ran. A pause holds a workflow\'s schedules, across new revisions, until resumed; missed ticks are not caught up.'), out,
      list.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'schedules' }, h('thead', {}, h('tr', {}, ['Workflow', '#', 'Cron', 'Zone', 'Overlap', 'Catchup', 'State', 'Next fire times', 'Last tick', 'Last run', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, list.map((s, i) => h('tr', { 'data-workflow': s.workflow, 'data-index': String(s.index) },
          h('td', {}, link(`/definitions/${enc(s.workflow)}`, s.workflow)), h('td', {}, String(s.index)), h('td', { class: 'mono' }, s.cron), h('td', {}, s.timezone),
          h('td', {}, s.overlap.replace('_', ' ')), h('td', {}, s.catchup), h('td', {}, s.paused ? badge('paused') : badge('active', 'running')),
          h('td', { class: 'next' }, (s.next_fire_times || []).length ? (s.next_fire_times || []).map((t) => h('div', { title: t }, `${fmtTime(t)} (${ago(t)})`)) : '—'),
          h('td', {}, s.last_tick_at ? fmtTime(s.last_tick_at) : '—'),
          h('td', {}, s.last_run_id ? link(`/runs/${s.last_run_id}`, h('span', { class: 'id' }, short(s.last_run_id))) : '—'),
          // One button per workflow, on its first row: the pause is the workflow's.
          h('td', {}, can('operator') && (i === 0 || list[i - 1].workflow !== s.workflow) ? act(s.workflow, s.paused ? 'resume' : 'pause') : null))))))
        : h('p', {}, 'No schedules: a definition declares them with ', h('code', {}, 'schedules: [{cron: "0 9 * * MON-FRI"}]'), '.'),
      workflows.length && !can('operator') ? h('p', { class: 'muted' }, 'Pausing and resuming needs the operator role.') : null);
    markReady(main, 'schedules');
  };
  await draw();
  const t = setInterval(() => draw().catch(() => {}), 5000);
  onLeave(() => clearInterval(t));
}

// ---- health ----------------------------------------------------------

async function pageHealth(main) {
  document.title = 'Health · Starflow';
  loading(main, 'Health');
  const draw = async () => {
    const hr = await api('GET', '/api/health');
    const lvl = { ok: 'succeeded', warning: 'stale', critical: 'failed', none: 'none' }[hr.warm] || 'none';
    const runners = hr.runners || [];
    const sw = hr.sweeps || {};
    const passes = sw.passes || [];
    const recs = hr.recoveries || [];
    replace(main, h('h1', {}, 'Health', badge(hr.status, hr.status === 'ok' ? 'succeeded' : 'failed')),
      h('div', { class: 'grid2' },
        h('div', { class: 'panel' }, h('h3', {}, 'Cold store'), h('p', { class: 'muted' }, 'The database every run, step and checkpoint is committed to (SQLite or PostgreSQL): the record.'), h('dl', { class: 'kv' }, kv('Answers', hr.store_ok ? 'yes' : `no — ${hr.store_error || ''}`), kv('Checked', fmtTime(hr.checked_at)))),
        h('div', { class: 'panel' }, h('h3', {}, 'Warm tier'), h('p', { class: 'muted' }, 'A live copy (memory or NATS) that live views and runner presence read; behind it, pages are stale, nothing is lost.'), h('dl', { class: 'kv' },
          kv('Level', badge(hr.warm, lvl)), kv('Enabled', hr.warm_enabled ? 'yes' : 'no (live views read the cold store)'),
          hr.warm_enabled ? kv('Reachable', hr.warm_reachable ? 'yes' : `no — ${hr.warm_error || ''}`) : null)),
        h('div', { class: 'panel' }, h('h3', {}, 'Outbox'), h('p', { class: 'muted' }, 'Changes committed to the cold store and not yet copied to the warm tier.'), h('dl', { class: 'kv' },
          kv('Pending rows', String(hr.outbox_pending ?? 0)), kv('Oldest unapplied', hr.outbox_oldest_age_seconds ? fmtDur(hr.outbox_oldest_age_seconds * 1000) : '—'),
          hr.outbox_error ? kv('Error', hr.outbox_error) : null)),
        h('div', { class: 'panel' }, h('h3', {}, 'Lease sweep (this server)'), h('dl', { class: 'kv' },
          kv('Last pass', sw.last_pass_at ? `${ago(sw.last_pass_at)} · ${fmtDur(sw.last_pass_duration_ms)}` : 'none yet (another process may lead maintenance)'),
          sw.last_pass_error ? kv('Error', sw.last_pass_error) : null))),
      h('h2', {}, `Runners alive (${runners.length})`),
      runners.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'runners' }, h('thead', {}, h('tr', {}, ['Runner', 'Pools', 'Runs held', 'Started', 'Last seen', 'From'].map((c) => h('th', {}, c)))),
        h('tbody', {}, runners.map((r) => h('tr', {}, h('td', { class: 'mono' }, r.id), h('td', {}, (r.pools || []).join(', ') || 'runs with no pool'),
          h('td', {}, r.concurrency ? `${r.runs_held} of ${r.concurrency}` : String(r.runs_held)),
          h('td', {}, fmtTime(r.started_at)), h('td', {}, ago(r.seen_at)), h('td', {}, r.source)))))) : h('p', { class: 'muted' }, 'No runner has reported itself alive: queued runs wait (queued_no_runner).'),
      h('h2', {}, 'Sweeps that recovered runs (this server)'),
      passes.length ? h('ul', { id: 'sweeps' }, passes.map((p) => h('li', {}, `${fmtTime(p.at)} · ${fmtDur(p.duration_ms)} · ${(p.recovered || []).length} run(s): `,
        (p.recovered || []).map((x) => h('span', {}, link(`/runs/${x.run_id}`, short(x.run_id)), ` ${x.workflow_name} ${x.outcome.replace(/_/g, ' ')} (${x.status_after}); `)))))
        : h('p', { class: 'muted' }, 'No sweep of this server has recovered a run since it started.'),
      h('h2', {}, 'Recent recoveries (every process)'),
      h('p', { class: 'muted' }, 'runner_lost: a runner stopped renewing its lease and the sweep took the run back; run_interrupted: an attempt ended without finishing (a retry follows unless attempts ran out or recovery is manual); run_dead_lettered: out of attempts.'),
      recs.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'recoveries' }, h('thead', {}, h('tr', {}, ['Time', 'Event', 'Run', 'Workflow', 'Detail'].map((c) => h('th', {}, c)))),
        h('tbody', {}, recs.map((e) => h('tr', {}, h('td', {}, fmtTime(e.created_at)), h('td', {}, e.event_type), h('td', {}, link(`/runs/${e.run_id}`, short(e.run_id))),
          h('td', {}, e.workflow_name || ''), h('td', { class: 'mono' }, e.payload !== undefined ? JSON.stringify(e.payload).slice(0, 200) : '')))))) : h('p', { class: 'muted' }, 'No run was recovered recently.'));
    markReady(main, 'health');
  };
  await draw();
  const t = setInterval(() => draw().catch(() => {}), 5000);
  onLeave(() => clearInterval(t));
}

// ---- start -----------------------------------------------------------

// The page draws at once while GET /api/me answers; pages that offer
// actions wait for it (meReady). A 401 from either sends to the sign-in.
let meReady = Promise.resolve();
function start() {
  if (location.pathname !== '/sign-in') {
    meReady = loadMe().then(() => { if (!me) signInNeeded(meRefusal); }, () => { /* the page says what failed */ });
  }
  render();
}
start();
// A page the browser restores from its back/forward cache (Back after
// a sign-out, or after a visit elsewhere) starts again: leaving closed its
// streams and timers, and what it showed may no longer be the caller's
// to see (signed out, key revoked), so it is read again from the API.
window.addEventListener('pageshow', (ev) => {
  if (!ev.persisted) return;
  me = null; meRefusal = ''; signInWhy = '';
  replace($('#who'));
  replace($('#main'));
  start();
});
