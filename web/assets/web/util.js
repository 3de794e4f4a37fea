// DOM and formatting helpers. Text always goes in as text nodes, never as
// HTML: job names, exceptions and config values come from users.

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}

export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}

function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(e, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// table builds a table from headers (a trailing '#' marks a numeric column)
// and rows of cells.
export function table(headers, rows, attrs = {}) {
  const num = headers.map((h) => h.endsWith('#'));
  return el('table', attrs,
    el('thead', {}, el('tr', {}, headers.map((h, i) => el('th', { class: num[i] ? 'num' : undefined }, num[i] ? h.slice(0, -1) : h)))),
    el('tbody', {}, rows.map((r) => el('tr', r.attrs || {}, (r.cells || r).map((c, i) => el('td', { class: num[i] ? 'num' : undefined }, c))))));
}

export function state(s) { return el('span', { class: 'state ' + (s || '') }, s || '?'); }

export function fmtCount(n) {
  if (n === undefined || n === null || n < 0) return '–';
  if (n < 1e4) return String(n);
  for (const [d, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) if (n >= d) return (n / d).toFixed(n >= 10 * d ? 0 : 1) + u;
  return String(n);
}

export function fmtBytes(n) {
  if (n === undefined || n === null || n < 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n >= 10 ? 0 : 1)) + ' ' + units[i];
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '–';
  if (ms < 1000) return ms + ' ms';
  const s = Math.floor(ms / 1000);
  if (s < 60) return (ms / 1000).toFixed(1) + ' s';
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + 'h ' : '') + m + 'm ' + (s % 60) + 's';
}

export function fmtTime(ms) {
  if (!ms || ms < 0) return '–';
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}

export function pct(r) { return r === undefined || r === null || Number.isNaN(r) ? '–' : Math.round(r * 100) + '%'; }
