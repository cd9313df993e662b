// lib.mjs — shared helpers for the `cinfer serve` tests driven from Node:
// start a server on a free loopback port, report one line per check, a hard
// timeout, the JSON Schemas of the OpenAI/Anthropic response shapes (ajv),
// and a raw SSE reader.
//
// Environment:
//   CINFER_BIN          the cinfer binary (make test sets it; default build/cinfer)
//   CINFER_SERVE_MODEL  the GGUF to serve (default ../shared/models/chat/qwen3-chat.gguf,
//                       or $CINFER_SHARED/models/chat/qwen3-chat.gguf)
//   CINFER_BUILD        the build dir, where artifacts (screenshots) go (default build)
//
// Every check prints "ok   - NAME" or "FAIL - NAME: why"; a script exits 0
// only when every check passed.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export const MODEL_NAME = 'qwen3-chat';
export const API_KEY = 'sdk-test-key';

export function binPath() {
  return path.resolve(process.env.CINFER_BIN || 'build/cinfer');
}
export function modelPath() {
  if (process.env.CINFER_SERVE_MODEL) return path.resolve(process.env.CINFER_SERVE_MODEL);
  const root = process.env.CINFER_SHARED || '../shared';
  return path.resolve(root, 'models/chat/qwen3-chat.gguf');
}
export function artifactDir() {
  const d = path.resolve(process.env.CINFER_BUILD || 'build', 'serve-artifacts');
  mkdirSync(d, { recursive: true });
  return d;
}

// ---- reporting --------------------------------------------------------------------------

let nFail = 0, nOk = 0;
const cleanups = [];

export function onCleanup(fn) { cleanups.push(fn); }

// Servers this process started: killed on any exit (an uncaught error, or
// `timeout` sending SIGTERM), so no cinfer is left listening.
const children = new Set();
process.on('exit', () => { for (const c of children) try { c.kill('SIGKILL'); } catch { /* gone */ } });
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => { console.log(`FAIL - interrupted by ${sig}`); process.exit(2); });
}

async function runCleanups() {
  while (cleanups.length) {
    const fn = cleanups.pop();
    try { await fn(); } catch (e) { console.log(`note - cleanup: ${e?.message || e}`); }
  }
}

function short(x, n = 300) {
  const s = typeof x === 'string' ? x : JSON.stringify(x);
  return s && s.length > n ? s.slice(0, n) + '…' : s;
}
export { short };

/**
 * Run one named check; an exception or a false return fails it.  Shape
 * mismatches recorded by shape() during the check fail it too, but do not
 * stop it, so the rest of its assertions still run and report.
 */
export async function check(name, fn) {
  shapeErrors = [];
  let why = null, r;
  try {
    r = await fn();
    if (r === false) why = 'returned false';
  } catch (e) {
    why = e?.status ? `HTTP ${e.status}: ${e.message}` : e?.message || String(e);
  }
  const shapes = shapeErrors;
  shapeErrors = null;
  if (!why && !shapes.length) {
    nOk++;
    console.log(`ok   - ${name}${typeof r === 'string' ? ` (${short(r, 120)})` : ''}`);
    return true;
  }
  nFail++;
  const parts = [...(why ? [why] : []), ...shapes.map((s) => `shape: ${s}`)];
  console.log(`FAIL - ${name}: ${parts.map((p) => short(p, 500)).join(' | ')}`);
  return false;
}
let shapeErrors = null;

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

/** The script's end: clean up, print the tally, exit 0 only if all passed. */
export async function finish(label) {
  await runCleanups();
  console.log(`${label}: ${nOk} ok, ${nFail} failed`);
  process.exit(nFail ? 1 : 0);
}

/** Kill everything and fail if the script runs longer than seconds. */
export function hardTimeout(seconds, label) {
  const t = setTimeout(async () => {
    console.log(`FAIL - ${label}: hard timeout after ${seconds} s`);
    await Promise.race([runCleanups(), new Promise((r) => setTimeout(r, 3000))]);
    process.exit(2);
  }, seconds * 1000);
  t.unref();
}

// ---- the server ---------------------------------------------------------------------------

/**
 * Start `cinfer serve` on 127.0.0.1 with an ephemeral port and wait until it
 * prints its address.  Returns {base (http://127.0.0.1:PORT), proc, stderr(),
 * stop() -> exit code}.  The server is killed at the script's end.
 */
export async function startServer(extra = [], { apiKey = API_KEY, timeoutS = 30 } = {}) {
  const bin = binPath(), model = modelPath();
  if (!existsSync(bin)) throw new Error(`cinfer binary ${bin} not found (set CINFER_BIN)`);
  if (!existsSync(model)) throw new Error(`model ${model} not found`);
  const args = ['serve', model, '--host', '127.0.0.1', '--port', '0', '--name', MODEL_NAME, '-c', '2048', '-t', '1',
    ...(apiKey ? ['--api-key', apiKey] : []), ...extra];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  let err = '';
  let exited = null;
  const exitP = new Promise((resolve) => proc.on('exit', (code, sig) => { exited = { code, sig }; children.delete(proc); resolve(exited); }));
  const base = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server did not start in ${timeoutS} s: ${short(err)}`)), timeoutS * 1000);
    proc.stderr.on('data', (d) => {
      err += d.toString();
      const m = err.match(/at http:\/\/([^\s]+?):(\d+)\/v1/);
      if (m) { clearTimeout(t); resolve(`http://127.0.0.1:${m[2]}`); }
    });
    proc.on('exit', (code, sig) => { clearTimeout(t); reject(new Error(`server exited (${code ?? sig}) before listening: ${short(err)}`)); });
  });
  const srv = {
    base,
    proc,
    stderr: () => err,
    exited: () => exited,
    /** SIGTERM, wait (up to 15 s, then SIGKILL); the exit {code, sig}. */
    async stop() {
      if (exited) return exited;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 15000);
      const r = await exitP;
      clearTimeout(t);
      return r;
    },
  };
  onCleanup(() => srv.stop());
  return srv;
}

// ---- JSON Schemas ----------------------------------------------------------------------------

let ajvInst = null;
/** ajv (draft 2020-12, all errors, strict) with every schema in schemas/ added by its $id. */
export function ajv() {
  if (ajvInst) return ajvInst;
  ajvInst = new Ajv2020({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
  const dir = path.join(here, 'schemas');
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.json')).sort())
    ajvInst.addSchema(JSON.parse(readFileSync(path.join(dir, f), 'utf8')));
  return ajvInst;
}

function schemaErrors(id, value, what) {
  const v = typeof id === 'string' ? ajv().getSchema(id) : ajv().compile(id);
  if (!v) throw new Error(`no schema ${id}`);
  if (v(value)) return null;
  const errs = v.errors.slice(0, 4).map((e) => `${e.instancePath || '/'} ${e.message}${e.params?.additionalProperty ? ` '${e.params.additionalProperty}'` : ''}`);
  return `${what} does not match ${typeof id === 'string' ? id : 'the schema'}: ${errs.join('; ')} in ${short(value, 160)}`;
}

/** Throw unless value validates against the schema with that $id (or an inline schema). */
export function validate(id, value, what = id) {
  const e = schemaErrors(id, value, what);
  if (e) throw new Error(e);
}

/**
 * A response shape check (schemas/*.json): a mismatch fails the current
 * check() but lets it go on.  Returns true when the value matches.
 */
export function shape(id, value, what = id) {
  const e = schemaErrors(id, value, what);
  if (!e) return true;
  if (!shapeErrors) throw new Error(e);
  if (shapeErrors.length < 3 && !shapeErrors.includes(e)) shapeErrors.push(e);
  return false;
}

// ---- raw HTTP ----------------------------------------------------------------------------------

export function authHeaders(key = API_KEY) {
  return { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };
}

/** POST a raw body (string) or an object; {status, headers, text, json}. */
export async function post(base, p, body, { headers = authHeaders(), signal } = {}) {
  const r = await fetch(base + p, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body), signal });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

export async function get(base, p, { headers = authHeaders() } = {}) {
  const r = await fetch(base + p, { headers });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

/**
 * Parse an SSE body (text/event-stream, https://html.spec.whatwg.org/#event-stream-interpretation)
 * into [{event, data}] (comments dropped, multi-line data joined with \n).
 */
export function parseSSE(text) {
  const out = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    let event = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (!line || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (event !== null || data.length) out.push({ event, data: data.join('\n') });
  }
  return out;
}

/** POST with stream: true and read the whole SSE body: {status, contentType, events}. */
export async function postStream(base, p, body, opts = {}) {
  const r = await post(base, p, body, opts);
  return { status: r.status, contentType: r.headers.get('content-type') || '', events: r.status === 200 ? parseSSE(r.text) : [], text: r.text, json: r.json };
}

/** JSON.parse that says what was not JSON. */
export function parseJSON(text, what = 'text') {
  try { return JSON.parse(text); } catch { throw new Error(`${what} is not JSON: ${short(String(text), 200)}`); }
}

/**
 * Throw unless text is a prefix of some JSON text (RFC 8259): what a
 * grammar-constrained generation cut off at max_tokens must still be.
 * Returns true when text is a complete JSON value, false for a proper prefix.
 */
export function checkJsonPrefix(text) {
  const t = String(text);
  const ws = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
  const fail = (why, at) => { throw new Error(`not a JSON prefix: ${why} at ${at}: …${short(t.slice(Math.max(0, at - 20), at + 20), 60)}`); };
  // index after the string opening at i, or -1 when the text ends inside it
  const scanString = (i) => {
    for (i++; i < t.length; i++) {
      const c = t[i], code = t.charCodeAt(i);
      if (c === '"') return i + 1;
      if (code < 0x20) fail(`raw control character U+${code.toString(16).padStart(4, '0')} in a string`, i);
      if (c !== '\\') continue;
      const e = t[i + 1];
      if (e === undefined) return -1;
      if ('"\\/bfnrt'.includes(e)) { i++; continue; }
      if (e !== 'u') fail(`bad escape \\${e}`, i);
      const h = t.slice(i + 2, i + 6);
      if (!/^[0-9a-fA-F]*$/.test(h)) fail('bad \\u escape', i);
      if (h.length < 4) return -1;
      i += 5;
    }
    return -1;
  };
  const st = [];
  let want = 'value', i = 0;
  const afterValue = () => { want = st.length ? 'sep' : 'end'; };
  for (;;) {
    while (i < t.length && ws(t[i])) i++;
    if (i >= t.length) return want === 'end';
    const c = t[i];
    if (want === 'end') fail('text after the value', i);
    if (want === 'colon') { if (c !== ':') fail("expected ':'", i); i++; want = 'value'; continue; }
    if (want === 'sep') {
      const top = st[st.length - 1];
      if (c === ',') { i++; want = top === '{' ? 'key' : 'value'; continue; }
      if ((c === '}' && top === '{') || (c === ']' && top === '[')) { st.pop(); i++; afterValue(); continue; }
      fail(`expected ',' or '${top === '{' ? '}' : ']'}'`, i);
    }
    if (want === 'key' || want === 'key-or-end') {
      if (c === '}' && want === 'key-or-end') { st.pop(); i++; afterValue(); continue; }
      if (c !== '"') fail('expected a key string', i);
      const j = scanString(i);
      if (j < 0) return false;
      i = j; want = 'colon'; continue;
    }
    if (c === ']' && want === 'value-or-end') { st.pop(); i++; afterValue(); continue; }
    if (c === '{' || c === '[') { st.push(c); i++; want = c === '{' ? 'key-or-end' : 'value-or-end'; continue; }
    if (c === '"') { const j = scanString(i); if (j < 0) return false; i = j; afterValue(); continue; }
    if (c === '-' || (c >= '0' && c <= '9')) {
      const m = /^-?(0|[1-9]\d*)?(\.\d*)?([eE][+-]?\d*)?/.exec(t.slice(i))[0];
      i += m.length;
      if (i >= t.length) return !st.length && /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(m);
      if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(m)) fail(`bad number ${m}`, i);
      afterValue(); continue;
    }
    const lit = ['true', 'false', 'null'].find((l) => l[0] === c);
    if (!lit) fail(`unexpected '${c}'`, i);
    const part = t.slice(i, i + lit.length);
    if (!lit.startsWith(part)) fail(`bad literal ${part}`, i);
    if (part.length < lit.length) return false;
    i += lit.length; afterValue();
  }
}
