// ollama.mjs — `cinfer serve`'s Ollama API driven by the npm `ollama` client
// (the official JavaScript library), plus the raw wire format where the client
// hides it.
//
// Checks: version; list (/api/tags) and ps with Ollama's field names; show
// (template, details, model_info, capabilities); chat non-streamed and streamed
// (NDJSON: content lines, then one done:true line with the timings), the
// request's sampling options (num_predict caps eval_count, seed repeats the
// text), logprobs; generate streamed and not, its context continuing a conversation,
// raw mode, format "json" (valid JSON back); think:false rendering Qwen3's
// empty think block; tools accepted; logprobs; embed (several inputs, unit vectors) and
// the older embeddings; errors: an unknown model is a ResponseError 404 with
// Ollama's {"error"} body, a bad field a 400, images a 400; and /v1/systemone
// (ollama.systemone): choice, noul and score answers, probabilities over the
// allowed values summing to 1, the choice their argmax, score their mean,
// confidence in [0, 1], usage counts, and 400s for malformed question sets.
//
// Usage: CINFER_BIN=build/cinfer node tests/serve/ollama.mjs   (exit 0 = all passed)
import { Ollama } from 'ollama';
import { MODEL_NAME, API_KEY, startServer, check, assert, finish, hardTimeout, short } from './lib.mjs';

hardTimeout(90, 'ollama.mjs');

const srv = await startServer().catch((e) => { console.log(`FAIL - start server: ${e.message}`); process.exit(1); });
const ollama = new Ollama({ host: srv.base, headers: { Authorization: `Bearer ${API_KEY}` } });
const M = MODEL_NAME;
const user = (content) => [{ role: 'user', content }];
const raw = async (path, body) => {
  const r = await fetch(`${srv.base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, type: r.headers.get('content-type') || '', text: await r.text() };
};
const isTime = (s) => typeof s === 'string' && !Number.isNaN(Date.parse(s));
const near = (a, b, tol = 1e-6) => Math.abs(a - b) <= tol;
const finalFields = (r) => {
  assert(r.done === true, `done ${r.done}`);
  assert(['stop', 'length'].includes(r.done_reason), `done_reason ${r.done_reason}`);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_count', 'eval_duration'])
    assert(Number.isInteger(r[k]) && r[k] >= 0, `${k} = ${r[k]}`);
  assert(r.prompt_eval_count > 0 && r.eval_count > 0, `counts ${r.prompt_eval_count}/${r.eval_count}`);
};

// ---- models --------------------------------------------------------------------------------
await check('version, list (/api/tags) and ps: Ollama field names, the served model as NAME:latest', async () => {
  const v = await ollama.version();
  assert(typeof v.version === 'string' && v.version.length > 0, `version ${short(v)}`);
  const l = await ollama.list();
  assert(Array.isArray(l.models) && l.models.length === 1, `models ${short(l)}`);
  const m = l.models[0];
  assert(m.name === `${M}:latest` && m.model === `${M}:latest`, `name ${m.name} model ${m.model}`);
  assert(Number.isInteger(m.size) && m.size > 1e6 && typeof m.digest === 'string' && isTime(m.modified_at), short(m));
  const d = m.details;
  assert(d.format === 'gguf' && d.family === 'qwen3' && d.families[0] === 'qwen3' && /M$/.test(d.parameter_size) &&
    typeof d.quantization_level === 'string', `details ${short(d)}`);
  const p = await ollama.ps();
  assert(p.models.length === 1 && p.models[0].context_length === 2048 && isTime(p.models[0].expires_at), `ps ${short(p)}`);
});

await check('show: the chat template, details, model_info (GGUF metadata), capabilities', async () => {
  const s = await ollama.show({ model: M });
  assert(s.template.includes('<|im_start|>'), `template ${short(s.template)}`);
  assert(s.details.family === 'qwen3', short(s.details));
  assert(s.model_info['general.architecture'] === 'qwen3' && s.model_info['qwen3.context_length'] === 4096,
    `model_info ${short(s.model_info)}`);
  assert(s.model_info['tokenizer.ggml.tokens'] === null, 'the vocabulary should be elided');
  for (const c of ['completion', 'tools', 'thinking']) assert(s.capabilities.includes(c), `capabilities ${s.capabilities}`);
  const by_tag = await ollama.show({ model: `${M}:latest` });
  assert(by_tag.template === s.template, 'NAME:latest shows the same model');
});

// ---- chat -----------------------------------------------------------------------------------
await check('chat non-streamed: message, done:true, the timings; num_predict caps eval_count; seed repeats', async () => {
  const opt = { num_predict: 6, temperature: 0.9, seed: 7 };
  const a = await ollama.chat({ model: M, messages: user('Say hello.'), options: opt });
  assert(a.model && isTime(a.created_at), short(a));
  assert(a.message.role === 'assistant' && typeof a.message.content === 'string' && a.message.content.length > 0, short(a.message));
  finalFields(a);
  assert(a.eval_count <= 6 && (a.done_reason === 'length') === (a.eval_count === 6), `eval ${a.eval_count} ${a.done_reason}`);
  const b = await ollama.chat({ model: M, messages: user('Say hello.'), options: opt });
  assert(b.message.content === a.message.content, `seed 7 twice: ${short(a.message.content)} vs ${short(b.message.content)}`);
});

await check('chat streamed: NDJSON content lines, then one done:true line; the text equals the non-streamed one', async () => {
  const opt = { num_predict: 8, temperature: 0 };
  const once = await ollama.chat({ model: M, messages: user('Count.'), options: opt });
  const parts = [];
  for await (const p of await ollama.chat({ model: M, messages: user('Count.'), options: opt, stream: true })) parts.push(p);
  assert(parts.length >= 2, `${parts.length} parts`);
  assert(parts.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'), 'content lines');
  finalFields(parts[parts.length - 1]);
  const text = parts.map((p) => p.message.content).join('');
  assert(text === once.message.content, `${short(text)} vs ${short(once.message.content)}`);
  const r = await raw('/api/chat', { model: M, messages: user('Hi'), options: { num_predict: 3 } }); // stream defaults to true
  assert(r.status === 200 && /application\/x-ndjson/.test(r.type), `${r.status} ${r.type}`);
  const lines = r.text.trim().split('\n').map((l) => JSON.parse(l));
  assert(lines.length >= 2 && lines[lines.length - 1].done === true, `${lines.length} lines`);
  return `${parts.length} lines`;
});

await check('chat: think:false renders Qwen3\'s empty think block (4 more prompt tokens); tools are accepted', async () => {
  const base = await ollama.chat({ model: M, messages: user('Hi'), options: { num_predict: 1 } });
  const off = await ollama.chat({ model: M, messages: user('Hi'), options: { num_predict: 1 }, think: false });
  assert(off.prompt_eval_count === base.prompt_eval_count + 4, `prompt ${base.prompt_eval_count} -> ${off.prompt_eval_count}`);
  const tools = [{ type: 'function', function: { name: 'get_time', description: 'the time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } }];
  const t = await ollama.chat({ model: M, messages: user('What time is it?'), tools, options: { num_predict: 4 } });
  finalFields(t);
  assert(t.prompt_eval_count > base.prompt_eval_count + 20, 'the tools are rendered into the prompt');
});

await check('chat and raw generate: logprobs with top_logprobs, one entry per generated token', async () => {
  const a = await ollama.chat({ model: M, messages: user('Hi'), logprobs: true, top_logprobs: 2, options: { num_predict: 3, temperature: 0 } });
  assert(Array.isArray(a.logprobs) && a.logprobs.length === a.eval_count, `logprobs ${short(a.logprobs)}`);
  for (const e of a.logprobs) {
    assert(typeof e.token === 'string' && e.logprob <= 0 && e.top_logprobs.length === 2, short(e));
    assert(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && near(e.top_logprobs[0].logprob, e.logprob, 1e-5),
      `greedy: the token is the best alternative ${short(e)}`);
  }
  const g = await ollama.generate({ model: M, prompt: 'abc', raw: true, logprobs: true, options: { num_predict: 2 } });
  assert(Array.isArray(g.logprobs) && g.logprobs.length === g.eval_count, `raw generate logprobs ${short(g.logprobs)}`);
});

await check('chat: format "json" and a schema give valid JSON', async () => {
  const a = await ollama.chat({ model: M, messages: user('A JSON object please.'), format: 'json', options: { num_predict: 40, temperature: 0 } });
  if (a.done_reason === 'stop') JSON.parse(a.message.content);
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false };
  const b = await ollama.chat({ model: M, messages: user('ok?'), format: schema, options: { num_predict: 20, temperature: 0 } });
  const v = JSON.parse(b.message.content);
  assert(typeof v.ok === 'boolean', `content ${short(b.message.content)}`);
});

// ---- generate --------------------------------------------------------------------------------
await check('generate: response and context; the context continues the conversation; raw; streamed', async () => {
  const a = await ollama.generate({ model: M, prompt: 'Once upon a time', options: { num_predict: 5, temperature: 0 } });
  assert(typeof a.response === 'string' && a.response.length > 0, short(a));
  finalFields(a);
  assert(Array.isArray(a.context) && a.context.length === a.prompt_eval_count + a.eval_count - (a.done_reason === 'stop' ? 1 : 0) ||
    a.context.length >= a.prompt_eval_count, `context ${a.context.length} for ${a.prompt_eval_count}+${a.eval_count}`);
  const b = await ollama.generate({ model: M, prompt: 'And then?', context: a.context, options: { num_predict: 3 } });
  assert(b.prompt_eval_count > a.context.length, `continued prompt ${b.prompt_eval_count} vs context ${a.context.length}`);
  const r = await ollama.generate({ model: M, prompt: 'abc', raw: true, options: { num_predict: 3 } });
  const t = await ollama.generate({ model: M, prompt: 'abc', options: { num_predict: 3 } });
  assert(r.prompt_eval_count < t.prompt_eval_count, `raw ${r.prompt_eval_count} vs templated ${t.prompt_eval_count}`);
  const parts = [];
  for await (const p of await ollama.generate({ model: M, prompt: 'Hi', stream: true, options: { num_predict: 4 } })) parts.push(p);
  assert(parts.length >= 2 && parts[parts.length - 1].done === true && Array.isArray(parts[parts.length - 1].context), `${parts.length} parts`);
  const load = await ollama.generate({ model: M, prompt: '' });
  assert(load.done === true && load.done_reason === 'load', `empty prompt: ${short(load)}`);
});

// ---- embeddings ------------------------------------------------------------------------------
await check('embed: one unit vector per input; the older embeddings endpoint', async () => {
  const e = await ollama.embed({ model: M, input: ['a cat', 'a dog'] });
  assert(e.embeddings.length === 2 && e.embeddings[0].length === 64, `shape ${e.embeddings.length}x${e.embeddings[0]?.length}`);
  const norm = Math.hypot(...e.embeddings[0]);
  assert(near(norm, 1, 1e-4), `norm ${norm}`);
  assert(e.prompt_eval_count > 0 && Number.isInteger(e.total_duration), short({ ...e, embeddings: '...' }));
  const one = await ollama.embed({ model: M, input: 'a cat' });
  assert(one.embeddings.length === 1 && near(one.embeddings[0][0], e.embeddings[0][0], 1e-5), 'single input');
  const old = await ollama.embeddings({ model: M, prompt: 'a cat' });
  assert(old.embedding.length === 64 && near(old.embedding[0], e.embeddings[0][0], 1e-5), 'embeddings');
});

// ---- errors -----------------------------------------------------------------------------------
await check('errors: unknown model 404, bad option 400, images 400, each {"error"} (ResponseError)', async () => {
  const cases = [
    [() => ollama.chat({ model: 'nope', messages: user('x') }), 404, 'nope'],
    [() => ollama.chat({ model: M, messages: user('x'), options: { temperature: 'hot' } }), 400, 'temperature'],
    [() => ollama.chat({ model: M, messages: [{ role: 'user', content: 'x', images: ['aGk='] }] }), 400, 'images'],
    [() => ollama.generate({ model: M, prompt: 'x', suffix: 'y' }), 400, 'suffix'],
    [() => ollama.show({ model: 'nope' }), 404, 'nope'],
    [() => ollama.delete({ model: M }), 404, 'not part of cinfer serve'], // DELETE /api/delete: not "use POST"
    [() => ollama.pull({ model: M }), 404, 'not part of cinfer serve'],
  ];
  for (const [fn, status, word] of cases) {
    let err = null;
    try { await fn(); } catch (e) { err = e; }
    assert(err && err.name === 'ResponseError' && err.status_code === status && err.error.includes(word),
      `expected ${status} naming ${word}, got ${err ? `${err.name} ${err.status_code} ${err.error || err.message}` : 'no error'}`);
  }
  const r = await raw('/api/chat', { model: 'nope', messages: user('x') });
  assert(r.status === 404 && Object.keys(JSON.parse(r.text)).join() === 'error', `body ${short(r.text)}`);
});

// ---- /v1/systemone -------------------------------------------------------------------------------
await check('systemone: choice, noul and score answers with probabilities over the allowed values', async () => {
  const r = await ollama.systemone({
    model: M,
    state: { service: 'checkout', errors: '500 since 9am', users_affected: 1200 },
    questions: {
      team: { type: 'choice', instructions: 'Which team should handle this ticket?', criteria: { billing: 'Payments and refunds', technical: 'Software errors', sales: null } },
      urgent: { type: 'noul', instructions: 'Is it urgent?', criteria: { false: 'can wait', true: 'now' } },
      severity: { type: 'score', instructions: 'How severe is it?', criteria: ['minor', 'notable', 'serious', 'critical'] },
    },
  });
  assert(r.model === M && Object.keys(r.answers).join() === 'team,urgent,severity', short(r));
  assert(r.usage.input_tokens > 50 && r.usage.output_tokens > 0, `usage ${short(r.usage)}`);
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
  const t = r.answers.team;
  assert(t.type === 'choice' && Object.keys(t.probabilities).join() === 'billing,technical,sales', short(t));
  assert(near(sum(t.probabilities), 1), `sum ${sum(t.probabilities)}`);
  const best = Object.entries(t.probabilities).sort((a, b) => b[1] - a[1])[0][0];
  assert(t.choice === best, `greedy: choice ${t.choice}, argmax ${best}`);
  assert(t.confidence >= 0 && t.confidence <= 1, `confidence ${t.confidence}`);
  const u = r.answers.urgent;
  assert(u.type === 'noul' && u.noul >= 0 && u.noul <= 1, short(u));
  const s = r.answers.severity;
  assert(s.type === 'score' && Object.keys(s.legend).join() === '0,1,2,3' && s.legend['3'] === 'critical', short(s));
  assert(near(sum(s.probabilities), 1), `sum ${sum(s.probabilities)}`);
  const mean = Object.entries(s.probabilities).reduce((a, [k, p]) => a + Number(k) * p, 0);
  assert(near(s.score, mean) && s.score >= 0 && s.score <= 3, `score ${s.score}, mean ${mean}`);
  // each option scored by the model: no two options share a probability because they share a first token
  const four = await ollama.systemone({ model: M, state: 'The app crashes on login', questions: { team: { type: 'choice',
    instructions: 'Which team?', criteria: { billing: 'Payments', technical: 'Software errors', sales: 'Pricing', legal: 'contracts' } } } });
  const ps = Object.values(four.answers.team.probabilities);
  assert(ps.length === 4 && near(sum(four.answers.team.probabilities), 1) && new Set(ps.map((p) => p.toPrecision(12))).size === 4,
    `probabilities ${short(four.answers.team.probabilities)}`);
  const again = await ollama.systemone({ model: M, state: 'x', questions: { q: { type: 'noul', instructions: 'Is x true?' } } });
  assert(again.answers.q.type === 'noul', short(again));
  return `team ${t.choice} (${t.probabilities[t.choice].toFixed(2)}), urgent ${u.noul.toFixed(2)}, severity ${s.score.toFixed(2)}`;
});

await check('systemone: malformed question sets are 400s naming the field', async () => {
  const bad = [
    [{ model: M, state: 'x', questions: {} }, 'questions'],
    [{ model: M, state: 'x', questions: { a: { type: 'choice', instructions: 'i', criteria: { only: null } } } }, 'questions.a.criteria'],
    [{ model: M, state: 'x', questions: { a: { type: 'score', instructions: 'i', criteria: ['one'] } } }, 'questions.a.criteria'],
    [{ model: M, state: 'x', questions: { a: { type: 'vote', instructions: 'i' } } }, 'questions.a'],
    [{ model: M, questions: { a: { type: 'noul', instructions: 'i' } } }, 'state'],
    [{ model: M, state: 'x', questions: { a: { type: 'noul' } } }, 'questions.a.instructions'],
  ];
  for (const [body, word] of bad) {
    let err = null;
    try { await ollama.systemone(body); } catch (e) { err = e; }
    assert(err && err.status_code === 400 && err.error.includes(word), `${short(body)}: ${err ? `${err.status_code} ${err.error}` : 'no error'}`);
  }
  let err = null;
  try { await ollama.systemone({ model: 'nope', state: 'x', questions: { a: { type: 'noul', instructions: 'i' } } }); } catch (e) { err = e; }
  assert(err && err.status_code === 404, `unknown model: ${err?.status_code}`);
});

await finish('ollama.mjs');
