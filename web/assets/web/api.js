// REST access: every call goes to the API base from the page's
// <meta name="gofl-api"> and carries the user's REST token, if any.
// The token lives in this tab's sessionStorage and is never logged.

const meta = document.querySelector('meta[name="gofl-api"]');
const base = (meta && meta.content && !meta.content.startsWith('{{')) ? meta.content.replace(/\/+$/, '') : '.';
const TOKEN_KEY = 'gofl.rest.token';

export class HTTPError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export function url(path) { return base + path; }

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}
export function setToken(t) {
  try { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); } catch { /* storage off */ }
}

let onUnauthorized = () => {};
export function whenUnauthorized(f) { onUnauthorized = f; }

async function request(method, path, body, accept) {
  const headers = { Accept: accept || 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url(path), init);
  if (resp.status === 401) onUnauthorized();
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText;
    try {
      const e = await resp.json();
      if (e && Array.isArray(e.errors)) msg = e.errors.join('; ');
    } catch { /* not JSON */ }
    throw new HTTPError(resp.status, msg);
  }
  return resp;
}

// get returns the JSON body of GET path; errors throw HTTPError.
export async function get(path) { return (await request('GET', path)).json(); }

// text returns the body of GET path as text.
export async function text(path) { return (await request('GET', path, undefined, 'text/plain, application/json')).text(); }

// send makes a call that changes something and returns its JSON body.
export async function send(method, path, body) {
  const resp = await request(method, path, body);
  const t = await resp.text();
  return t ? JSON.parse(t) : {};
}

// optional is get for endpoints a cluster may not serve: null when absent.
export async function optional(path) {
  try { return await get(path); } catch (e) {
    if (e instanceof HTTPError && (e.status === 404 || e.status === 405 || e.status === 501)) return null;
    throw e;
  }
}
