// load.mjs — a bounded load test of `cinfer serve` on loopback: N requests
// (default 200) from C concurrent clients (default 8), a fixed pseudo-random
// mix of valid OpenAI/Anthropic requests (streaming and not, small
// max_tokens), clients that disconnect mid-stream or while waiting, and
// malformed requests (bad JSON, missing or mistyped fields, unknown model,
// wrong key, unknown route, wrong method, oversized body, garbage and
// truncated HTTP on a raw socket).
//
// Pass when: the server never exits; every request is answered with its
// expected code (valid: 200, or 429 with Retry-After when the queue is full;
// malformed: its 4xx with the API's error shape) or, for the raw-socket ones,
// answered 4xx or closed; no request goes unanswered; afterwards /health says
// the queue is empty and nothing is running, a new request still succeeds,
// and SIGTERM ends the server with status 0.
//
// Prints one line per check and a summary: requests by outcome and status,
// latency p50/p99 of answered requests, total time.  Results also go to
// $CINFER_BUILD/serve-artifacts/load.json.
//
// Usage: CINFER_BIN=build/cinfer node tests/serve/load.mjs [--requests N] [--clients C]
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  MODEL_NAME, API_KEY, startServer, check, assert, finish, hardTimeout, shape, get, parseSSE, artifactDir, short,
} from './lib.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? Number(argv[i + 1]) : def; };
const N = opt('--requests', 200), C = opt('--clients', 8);
hardTimeout(Math.max(90, N * 0.5), 'load.mjs');

const srv = await startServer().catch((e) => { console.log(`FAIL - start server: ${e.message}`); process.exit(1); });
const port = Number(new URL(srv.base).port);
const M = MODEL_NAME;
const H = { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` };
const AH = { 'Content-Type': 'application/json', 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01' };
const msgs = (i) => [{ role: 'user', content: `Request ${i}: tell me something.` }];

// ---- the request kinds ------------------------------------------------------------------------
// Each returns {outcome, status, ms}: outcome 'ok' (answered as expected),
// 'rejected' (a proper 4xx/429), 'aborted' (we left on purpose), or 'bad: why'.

const TIMEOUT_MS = 30000;

async function http(pathname, { method = 'POST', headers = H, body } = {}) {
  const t0 = performance.now();
  const r = await fetch(srv.base + pathname, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, ms: performance.now() - t0 };
}

function json(text) { try { return JSON.parse(text); } catch { return null; } }

/** Does v match the schema?  (shape() outside a check throws on a mismatch.) */
function matches(id, v) { try { return shape(id, v, id.split('/').pop()); } catch (e) { return e.message; } }

/** A valid request: 200 with a body (or every stream event) of the API's shape, or 429 + Retry-After (queue full). */
function validOutcome(r, api, stream, kind) {
  if (r.status === 429) return r.headers.get('retry-after') ? 'rejected' : 'bad: 429 without Retry-After';
  if (r.status !== 200) return `bad: status ${r.status} ${short(r.text, 120)}`;
  const bad = (m) => `bad: ${short(m, 200)}`;
  if (!stream) {
    const j = json(r.text);
    const id = api === 'anthropic' ? 'anthropic#/$defs/Message' : kind === 'completion' ? 'openai#/$defs/Completion' : 'openai#/$defs/ChatCompletion';
    const m = matches(id, j);
    return m === true ? 'ok' : bad(m);
  }
  const ev = parseSSE(r.text);
  if (!ev.length) return 'bad: empty stream';
  if (api === 'anthropic') {
    for (const e of ev) { const m = matches('anthropic#/$defs/StreamEvent', json(e.data)); if (m !== true) return bad(m); }
    return json(ev[ev.length - 1].data)?.type === 'message_stop' ? 'ok' : bad(`stream end ${short(ev.slice(-1))}`);
  }
  if (ev[ev.length - 1].data !== '[DONE]') return bad(`stream end ${short(ev.slice(-1))}`);
  for (const e of ev.slice(0, -1)) { const m = matches('openai#/$defs/ChatCompletionChunk', json(e.data)); if (m !== true) return bad(m); }
  return 'ok';
}

/** A malformed request: exactly the expected code and the API's error shape. */
function errorOutcome(r, want, api) {
  if (r.status !== want) return `bad: status ${r.status} (want ${want}) ${short(r.text, 120)}`;
  const m = matches(api === 'anthropic' ? 'anthropic#/$defs/ErrorResponse' : 'openai#/$defs/Error', json(r.text));
  return m === true ? 'rejected' : `bad: ${short(m, 200)}`;
}

/** Stream, and leave after the first content event (or after `after` ms while waiting). */
async function abortMidStream(i, api) {
  const ac = new AbortController();
  const t0 = performance.now();
  const timer = setTimeout(() => ac.abort(new Error('timeout')), TIMEOUT_MS);
  const p = api === 'anthropic' ? '/v1/messages' : '/v1/chat/completions';
  try {
    const r = await fetch(srv.base + p, { method: 'POST', headers: api === 'anthropic' ? AH : H, signal: ac.signal,
      body: JSON.stringify({ model: M, messages: msgs(i), max_tokens: 200, stream: true }) });
    if (r.status === 429) return { outcome: 'rejected', status: 429, ms: performance.now() - t0 };
    if (r.status !== 200) return { outcome: `bad: status ${r.status}`, status: r.status, ms: performance.now() - t0 };
    const rd = r.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { done, value } = await rd.read();
      if (done) return { outcome: 'ok', status: 200, ms: performance.now() - t0, note: 'finished before the abort' };
      buf += dec.decode(value, { stream: true });
      if (/content_block_delta|"content":"[^"]/.test(buf)) { ac.abort(); return { outcome: 'aborted', status: 200, ms: performance.now() - t0 }; }
    }
  } catch (e) {
    if (ac.signal.aborted && ac.signal.reason?.message === 'timeout') return { outcome: 'bad: no answer in 30 s', status: 0, ms: TIMEOUT_MS };
    return { outcome: `bad: ${e.message}`, status: 0, ms: performance.now() - t0 };
  } finally { clearTimeout(timer); }
}

/** A non-streaming request the client gives up on after ms. */
async function abortWaiting(i, ms) {
  const t0 = performance.now();
  try {
    const r = await fetch(srv.base + '/v1/chat/completions', { method: 'POST', headers: H, signal: AbortSignal.timeout(ms),
      body: JSON.stringify({ model: M, messages: msgs(i), max_tokens: 200 }) });
    const text = await r.text();
    return { outcome: validOutcome({ status: r.status, headers: r.headers, text }, 'openai', false), status: r.status, ms: performance.now() - t0, note: 'answered before the abort' };
  } catch (e) {
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return { outcome: 'aborted', status: 0, ms: performance.now() - t0 };
    return { outcome: `bad: ${e.message}`, status: 0, ms: performance.now() - t0 };
  }
}

/**
 * Raw socket: send bytes, then wait (up to RAW_HOLD_S) for an answer or a
 * close.  A 4xx status line, or a close without an answer, is a proper
 * rejection; silence that holds the connection (and, thread per connection,
 * a server thread) open is not.  RAW_HOLD_S leaves room for a server that
 * times out a connection with no request in some seconds rather than
 * answering 400 at once.
 */
const RAW_HOLD_S = 12;
function raw(bytes, { closeAfterSend = false } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const s = net.connect(port, '127.0.0.1');
    let got = '', settled = false;
    const done = (outcome, status) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      s.destroy();
      resolve({ outcome, status, ms: performance.now() - t0 });
    };
    const judge = () => {
      const m = got.match(/^HTTP\/1\.[01] (\d{3})/);
      if (!got) return done('rejected', 0); // closed without an answer
      if (m && +m[1] >= 400 && +m[1] < 500) return done('rejected', +m[1]);
      return done(`bad: answered ${short(got, 60)}`, m ? +m[1] : 0);
    };
    const timer = setTimeout(() => done(got ? `bad: answer incomplete after ${RAW_HOLD_S} s` : `bad: no answer and no close in ${RAW_HOLD_S} s (the connection is held open)`, 0), RAW_HOLD_S * 1000);
    s.on('connect', () => {
      s.write(Buffer.from(bytes, 'latin1'));
      if (closeAfterSend) { s.end(); setTimeout(() => done('aborted', 0), 20); }
    });
    s.on('data', (d) => { got += d.toString('latin1'); if (/\r\n\r\n/.test(got)) judge(); });
    s.on('error', () => {});
    s.on('close', judge);
  });
}

const big = 'x'.repeat(9 << 20); // over the 8 MiB default body limit
const kinds = [
  // [weight, name, fn(i)]
  [24, 'chat', async (i) => { const r = await http('/v1/chat/completions', { body: { model: M, messages: msgs(i), max_tokens: 8 } }); return { outcome: validOutcome(r, 'openai', false), status: r.status, ms: r.ms }; }],
  [20, 'chat-stream', async (i) => { const r = await http('/v1/chat/completions', { body: { model: M, messages: msgs(i), max_tokens: 8, stream: true, stream_options: { include_usage: true } } }); return { outcome: validOutcome(r, 'openai', true), status: r.status, ms: r.ms }; }],
  [8, 'completion', async (i) => { const r = await http('/v1/completions', { body: { model: M, prompt: `Story ${i}:`, max_tokens: 8 } }); return { outcome: validOutcome(r, 'openai', false, 'completion'), status: r.status, ms: r.ms }; }],
  [10, 'messages', async (i) => { const r = await http('/v1/messages', { headers: AH, body: { model: M, messages: msgs(i), max_tokens: 8 } }); return { outcome: validOutcome(r, 'anthropic', false), status: r.status, ms: r.ms }; }],
  [8, 'messages-stream', async (i) => { const r = await http('/v1/messages', { headers: AH, body: { model: M, messages: msgs(i), max_tokens: 8, stream: true } }); return { outcome: validOutcome(r, 'anthropic', true), status: r.status, ms: r.ms }; }],
  [12, 'abort-mid-stream', (i) => abortMidStream(i, 'openai')],
  [5, 'abort-mid-stream-anthropic', (i) => abortMidStream(i, 'anthropic')],
  [4, 'abort-while-waiting', (i) => abortWaiting(i, 15)],
  [4, 'bad-json', async () => { const r = await http('/v1/chat/completions', { body: '{"model": "qwen3-chat", "messages": [{"role": "user", "content": "hi"}' }); return { outcome: errorOutcome(r, 400), status: r.status, ms: r.ms }; }],
  [4, 'missing-messages', async () => { const r = await http('/v1/chat/completions', { body: { model: M, max_tokens: 8 } }); return { outcome: errorOutcome(r, 400), status: r.status, ms: r.ms }; }],
  [3, 'bad-type', async (i) => { const r = await http('/v1/chat/completions', { body: { model: M, messages: msgs(i), max_tokens: 'eight' } }); return { outcome: errorOutcome(r, 400), status: r.status, ms: r.ms }; }],
  [3, 'missing-max-tokens-anthropic', async (i) => { const r = await http('/v1/messages', { headers: AH, body: { model: M, messages: msgs(i) } }); return { outcome: errorOutcome(r, 400, 'anthropic'), status: r.status, ms: r.ms }; }],
  [3, 'unknown-model', async (i) => { const r = await http('/v1/chat/completions', { body: { model: 'nope', messages: msgs(i), max_tokens: 8 } }); return { outcome: errorOutcome(r, 404), status: r.status, ms: r.ms }; }],
  [3, 'wrong-key', async (i) => { const r = await http('/v1/chat/completions', { headers: { ...H, Authorization: 'Bearer wrong' }, body: { model: M, messages: msgs(i), max_tokens: 8 } }); return { outcome: errorOutcome(r, 401), status: r.status, ms: r.ms }; }],
  [2, 'unknown-route', async () => { const r = await http('/v1/nothing-here', { body: {} }); return { outcome: errorOutcome(r, 404), status: r.status, ms: r.ms }; }],
  [2, 'wrong-method', async () => { const r = await http('/v1/chat/completions', { method: 'GET' }); return { outcome: errorOutcome(r, 405), status: r.status, ms: r.ms }; }],
  [1, 'body-too-large', async () => { const r = await http('/v1/chat/completions', { body: big }); return { outcome: errorOutcome(r, 413), status: r.status, ms: r.ms }; }],
  [1, 'raw-garbage', () => raw('GARBAGE \xff\xfe\r\n\r\n')],
  // NUL bytes in the request line (as in a TLS ClientHello sent to the plain
  // port): libmicrohttpd 0.9.75 neither answers nor closes; only its
  // connection timeout (MHD_OPTION_CONNECTION_TIMEOUT) ends the connection.
  [1, 'raw-binary', () => raw('\x00\x01\x02 \x7f\r\n\r\n')],
  [1, 'raw-tls-hello', () => raw('\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03' + '\x00'.repeat(32) + '\r\n\r\n')],
  [2, 'raw-truncated-body', () => raw(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"model":`, { closeAfterSend: true })],
];

// a fixed mix: weights scaled to N, order shuffled by a seeded PRNG
const totalW = kinds.reduce((a, k) => a + k[0], 0);
const plan = [];
for (const [w, name, fn] of kinds) for (let k = 0; k < Math.max(1, Math.round((w * N) / totalW)); k++) plan.push({ name, fn });
while (plan.length > N) plan.splice(plan.findIndex((p) => p.name === 'chat'), 1);
while (plan.length < N) plan.push(plan[0]);
let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
for (let i = plan.length - 1; i > 0; i--) { const j = Math.floor(rnd() * (i + 1)); [plan[i], plan[j]] = [plan[j], plan[i]]; }

// ---- run --------------------------------------------------------------------------------------------
const results = [];
let next = 0, serverDied = null;
srv.proc.on('exit', (code, sig) => { serverDied = `exited ${code ?? sig} during the load`; });
const t0 = performance.now();
await Promise.all(Array.from({ length: C }, async () => {
  while (next < plan.length) {
    const i = next++;
    const p = plan[i];
    let r;
    try { r = await p.fn(i); } catch (e) { r = { outcome: `bad: ${e.name === 'TimeoutError' ? 'no answer in 30 s' : e.message}`, status: 0, ms: 0 }; }
    results.push({ i, kind: p.name, ...r });
  }
}));
const wall = (performance.now() - t0) / 1000;

// ---- summary ------------------------------------------------------------------------------------------
const count = (f) => results.filter(f).length;
const byOutcome = {}, byStatus = {}, byKind = {};
for (const r of results) {
  const o = r.outcome.startsWith('bad') ? 'bad' : r.outcome;
  byOutcome[o] = (byOutcome[o] || 0) + 1;
  byStatus[r.status || 'closed/aborted'] = (byStatus[r.status || 'closed/aborted'] || 0) + 1;
  byKind[r.kind] = (byKind[r.kind] || 0) + 1;
}
const lat = results.filter((r) => r.outcome === 'ok' || (r.outcome === 'rejected' && r.status)).map((r) => r.ms).sort((a, b) => a - b);
const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))] : NaN);
const okLat = results.filter((r) => r.outcome === 'ok').map((r) => r.ms).sort((a, b) => a - b);
const okPct = (p) => (okLat.length ? okLat[Math.min(okLat.length - 1, Math.floor((p / 100) * okLat.length))] : NaN);
const summary = {
  requests: results.length, clients: C, wall_s: +wall.toFixed(2), req_per_s: +(results.length / wall).toFixed(1),
  by_outcome: byOutcome, by_status: byStatus, by_kind: byKind,
  latency_ms_answered: { p50: +pct(50).toFixed(1), p99: +pct(99).toFixed(1), max: +(lat[lat.length - 1] ?? NaN).toFixed(1) },
  latency_ms_generations: { p50: +okPct(50).toFixed(1), p99: +okPct(99).toFixed(1) },
  finished_before_abort: count((r) => r.note),
  bad: results.filter((r) => r.outcome.startsWith('bad')).slice(0, 10).map((r) => `${r.kind}: ${r.outcome}`),
};
console.log(`load: ${results.length} requests, ${C} clients, ${summary.wall_s} s (${summary.req_per_s} req/s)`);
console.log(`load: outcomes ${JSON.stringify(byOutcome)}`);
console.log(`load: statuses ${JSON.stringify(byStatus)}`);
console.log(`load: latency answered p50 ${summary.latency_ms_answered.p50} ms, p99 ${summary.latency_ms_answered.p99} ms; generations (ok) p50 ${summary.latency_ms_generations.p50} ms, p99 ${summary.latency_ms_generations.p99} ms`);

await check(`server alive through the load`, () => { assert(!serverDied, `${serverDied}; stderr ${short(srv.stderr(), 400)}`); });
await check(`every request answered with its expected code (${results.length}/${N})`, () => {
  assert(results.length === N, `${results.length} results`);
  assert(!summary.bad.length, `${count((r) => r.outcome.startsWith('bad'))} bad: ${summary.bad.join(' | ')}`);
});
await check('valid requests succeeded (no 5xx; at least half of all requests ok)', () => {
  const five = count((r) => r.status >= 500);
  const ok = count((r) => r.outcome === 'ok');
  assert(five === 0, `${five} answers 5xx`);
  assert(ok >= N * 0.5, `only ${ok} ok`);
  return `${ok} ok, ${count((r) => r.status === 429)} × 429`;
});
await check('mid-stream disconnects happened (the cancel path ran)', () => {
  const a = count((r) => r.outcome === 'aborted' && r.kind.startsWith('abort-mid'));
  assert(a >= 1, `none of ${count((r) => r.kind.startsWith('abort-mid'))} streams was left mid-way`);
  return `${a} streams left mid-way`;
});
await check('no leaked slots: /health reports an empty queue and an idle worker', async () => {
  let h = null;
  for (let k = 0; k < 50; k++) { // a cancelled generation stops at its next token
    h = await get(srv.base, '/health');
    if (h.json?.queued === 0 && h.json?.busy === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(h.status === 200 && h.json?.status === 'ok' && h.json.queued === 0 && h.json.busy === 0, `health ${h.status} ${short(h.text)}`);
  return h.text;
});
await check('server still answers a new request', async () => {
  const r = await http('/v1/chat/completions', { body: { model: M, messages: msgs(-1), max_tokens: 4 } });
  assert(r.status === 200 && validOutcome(r, 'openai', false) === 'ok', `status ${r.status} ${short(r.text)}`);
});
await check('SIGTERM exits 0', async () => {
  const ex = await srv.stop();
  assert(ex.code === 0, `exit ${JSON.stringify(ex)}; stderr ${short(srv.stderr(), 400)}`);
});

const out = path.join(artifactDir(), 'load.json');
writeFileSync(out, JSON.stringify({ summary, results }, null, 1));
console.log(`load: results in ${out}`);
await finish('load.mjs');
