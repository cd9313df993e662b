// openai.mjs — `cinfer serve` driven by the official OpenAI SDK (npm `openai`).
// Every response body and stream chunk is validated against schemas/openai.json
// (written from the OpenAI API reference and the SDK's types).
//
// Checks: models list; chat non-streaming and streaming (SDK and raw SSE);
// completions; response_format json_schema (content parses and validates) and
// json_object; a forced tool call whose arguments validate against the tool's
// parameters (non-streaming and streamed), and the tool-result turn; logprobs;
// penalties; prefix-cache usage (cached_tokens); /v1/embeddings; /v1/responses;
// errors for a bad model, bad JSON, a missing field and a wrong key.
//
// Usage: CINFER_BIN=build/cinfer node tests/serve/openai.mjs   (exit 0 = all passed)
import OpenAI from 'openai';
import {
  MODEL_NAME, API_KEY, startServer, check, assert, finish, hardTimeout, validate, shape, parseJSON, checkJsonPrefix, post, get, postStream, short,
} from './lib.mjs';

hardTimeout(90, 'openai.mjs');

const srv = await startServer().catch((e) => { console.log(`FAIL - start server: ${e.message}`); process.exit(1); });
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 30000 });
const M = MODEL_NAME;
const user = (content) => [{ role: 'user', content }];

// ---- models ---------------------------------------------------------------------------------
await check('GET /v1/models: shape, lists the served model (SDK models.list)', async () => {
  const raw = await get(srv.base, '/v1/models');
  assert(raw.status === 200, `status ${raw.status}`);
  shape('openai#/$defs/ModelList', raw.json, '/v1/models');
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert(ids.includes(M), `models.list() = ${JSON.stringify(ids)}`);
});

// ---- chat --------------------------------------------------------------------------------------
await check('chat non-streaming (SDK): ChatCompletion shape, usage adds up, finish_reason fits', async () => {
  const { data, response } = await client.chat.completions
    .create({ model: M, messages: [{ role: 'system', content: 'Be brief.' }, ...user('Say hello.')], max_tokens: 8, temperature: 0 })
    .withResponse();
  assert(/application\/json/.test(response.headers.get('content-type')), `content-type ${response.headers.get('content-type')}`);
  shape('openai#/$defs/ChatCompletion', data, 'chat.completion');
  const u = data.usage, c = data.choices[0];
  assert(u, 'usage missing');
  assert(u.total_tokens === u.prompt_tokens + u.completion_tokens, `usage ${JSON.stringify(u)}`);
  assert(u.completion_tokens >= 1 && u.completion_tokens <= 8, `completion_tokens ${u.completion_tokens} for max_tokens 8`);
  assert((c.finish_reason === 'length') === (u.completion_tokens === 8) || c.finish_reason === 'stop',
    `finish_reason ${c.finish_reason} with ${u.completion_tokens} tokens`);
  assert(typeof c.message.content === 'string' && c.message.content.length > 0, 'empty content');
  assert(data.model === M, `model ${data.model}`);
});

await check('chat streaming (SDK): every chunk is a ChatCompletionChunk; role first, one finish, usage chunk last', async () => {
  const stream = await client.chat.completions.create({
    model: M, messages: user('Count to five.'), max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const ch of stream) { shape('openai#/$defs/ChatCompletionChunk', ch, `chunk ${chunks.length}`); chunks.push(ch); }
  assert(chunks.length >= 3, `${chunks.length} chunks`);
  assert(new Set(chunks.map((c) => c.id)).size === 1, 'chunk ids differ');
  assert(chunks[0].choices[0]?.delta?.role === 'assistant', `first delta ${JSON.stringify(chunks[0].choices[0]?.delta)}`);
  const fin = chunks.filter((c) => c.choices[0]?.finish_reason);
  assert(fin.length === 1, `${fin.length} chunks with finish_reason`);
  const last = chunks[chunks.length - 1];
  assert(last.usage && last.choices.length === 0, `last chunk is not the usage chunk: ${short(last)}`);
  const text = chunks.map((c) => c.choices[0]?.delta?.content || '').join('');
  assert(text.length > 0, 'no streamed text');
  assert(last.usage.completion_tokens >= 1 && last.usage.completion_tokens <= 12, `usage ${JSON.stringify(last.usage)}`);
  return `${chunks.length} chunks, ${last.usage.completion_tokens} tokens`;
});

await check('chat streaming (raw SSE): text/event-stream, data-only events, all JSON chunks valid, ends with [DONE]', async () => {
  const r = await postStream(srv.base, '/v1/chat/completions', { model: M, messages: user('Hi'), max_tokens: 6, stream: true });
  assert(r.status === 200, `status ${r.status}: ${short(r.text)}`);
  assert(/^text\/event-stream/.test(r.contentType), `content-type ${r.contentType}`);
  assert(r.events.length >= 3, `${r.events.length} events`);
  assert(r.events.every((e) => e.event === null), 'OpenAI streams use data-only events');
  assert(r.events[r.events.length - 1].data === '[DONE]', `last event ${short(r.events[r.events.length - 1])}`);
  r.events.slice(0, -1).forEach((e, i) => shape('openai#/$defs/ChatCompletionChunk', parseJSON(e.data, `event ${i}`), `event ${i}`));
});

// ---- completions -------------------------------------------------------------------------------
await check('completions (SDK): text_completion shape, non-streaming and streaming', async () => {
  const c = await client.completions.create({ model: M, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
  shape('openai#/$defs/Completion', c, 'text_completion');
  const s = await client.completions.create({ model: M, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, stream: true });
  let n = 0, fin = 0;
  for await (const ch of s) { shape('openai#/$defs/CompletionChunk', ch, `chunk ${n}`); n++; if (ch.choices[0]?.finish_reason) fin++; }
  assert(n >= 2 && fin === 1, `${n} chunks, ${fin} with finish_reason`);
});

// ---- structured output ---------------------------------------------------------------------------
const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    pets: { type: 'array', items: { enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
  },
  required: ['name', 'age', 'pets'],
  additionalProperties: false,
};
const personFormat = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } };

await check('response_format json_schema: content parses and validates against the schema', async () => {
  const r = await client.chat.completions.create({
    model: M, messages: user('Describe a person as JSON.'), max_tokens: 200, temperature: 0.7, seed: 7, response_format: personFormat,
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const c = r.choices[0];
  assert(c.finish_reason === 'stop', `finish_reason ${c.finish_reason} (the grammar should end the object)`);
  validate(personSchema, parseJSON(c.message.content, 'content'), 'content');
  return short(c.message.content, 80);
});

await check('response_format json_schema streamed: joined deltas parse and validate', async () => {
  const s = await client.chat.completions.create({
    model: M, messages: user('JSON please.'), max_tokens: 200, temperature: 0.7, seed: 11, response_format: personFormat, stream: true,
  });
  let text = '';
  for await (const ch of s) { shape('openai#/$defs/ChatCompletionChunk', ch, 'chunk'); text += ch.choices[0]?.delta?.content || ''; }
  validate(personSchema, parseJSON(text, 'streamed content'), 'streamed content');
});

await check('response_format json_object: the answer is a JSON object (or, cut at max_tokens, a prefix of one)', async () => {
  // json_object bounds no string, and a random-weight model rarely closes one,
  // so an answer cut at max_tokens (finish_reason length: incomplete JSON, as
  // the reference says) must still be a valid prefix of a JSON object.
  const r = await client.chat.completions.create({
    model: M, messages: user('Reply in JSON.'), max_tokens: 200, temperature: 0.7, seed: 3, response_format: { type: 'json_object' },
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const c = r.choices[0], text = c.message.content;
  assert(text.trimStart().startsWith('{'), `does not start an object: ${short(text)}`);
  const complete = checkJsonPrefix(text);
  if (c.finish_reason === 'stop') {
    assert(complete, `finish_reason stop but incomplete JSON: ${short(text)}`);
    const v = parseJSON(text, 'content');
    assert(v && typeof v === 'object' && !Array.isArray(v), `not an object: ${short(text)}`);
  } else {
    assert(c.finish_reason === 'length' && r.usage.completion_tokens === 200, `finish_reason ${c.finish_reason} after ${r.usage.completion_tokens} tokens`);
  }
  return `${c.finish_reason}, ${text.length} chars`;
});

// ---- tools ---------------------------------------------------------------------------------------
const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherParams, strict: true } },
  { type: 'function', function: { name: 'get_time', description: 'Current time in a time zone', parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
];
let toolCall = null;

await check('tool call (tool_choice forces get_weather): finish_reason tool_calls, arguments validate against the parameters', async () => {
  const r = await client.chat.completions.create({
    model: M, messages: user('What is the weather in Paris?'), max_tokens: 200, temperature: 0.7, seed: 5,
    tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const c = r.choices[0];
  assert(c.finish_reason === 'tool_calls', `finish_reason ${c.finish_reason}; message ${short(c.message)}`);
  const tc = c.message.tool_calls;
  assert(Array.isArray(tc) && tc.length >= 1, `tool_calls ${short(tc)}`);
  assert(tc[0].function.name === 'get_weather', `called ${tc[0].function.name}`);
  validate(weatherParams, parseJSON(tc[0].function.arguments, 'arguments'), 'arguments');
  toolCall = { message: c.message, id: tc[0].id };
  return tc[0].function.arguments;
});

await check('tool call (tool_choice "required"): a call to one of the tools, arguments valid', async () => {
  const r = await client.chat.completions.create({
    model: M, messages: user('Use a tool.'), max_tokens: 200, temperature: 0.7, seed: 9, tools, tool_choice: 'required',
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const tc = r.choices[0].message.tool_calls;
  assert(r.choices[0].finish_reason === 'tool_calls' && tc?.length >= 1, `finish ${r.choices[0].finish_reason}, tool_calls ${short(tc)}`);
  for (const t of tc) {
    const fn = tools.find((x) => x.function.name === t.function.name);
    assert(fn, `unknown tool ${t.function.name}`);
    validate(fn.function.parameters, parseJSON(t.function.arguments, 'arguments'), `${t.function.name} arguments`);
  }
});

await check('tool call streamed: delta.tool_calls assemble into valid arguments, finish_reason tool_calls', async () => {
  const s = await client.chat.completions.create({
    model: M, messages: user('Weather in Oslo?'), max_tokens: 200, temperature: 0.7, seed: 13, stream: true,
    tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const calls = [];
  let finish = null;
  for await (const ch of s) {
    shape('openai#/$defs/ChatCompletionChunk', ch, 'chunk');
    const ch0 = ch.choices[0];
    if (!ch0) continue;
    for (const d of ch0.delta.tool_calls || []) {
      const c = (calls[d.index] ||= { id: '', name: '', args: '' });
      if (d.id) c.id = d.id;
      if (d.function?.name) c.name += d.function.name;
      if (d.function?.arguments) c.args += d.function.arguments;
    }
    if (ch0.finish_reason) finish = ch0.finish_reason;
  }
  assert(finish === 'tool_calls', `finish_reason ${finish}`);
  assert(calls.length >= 1 && calls[0].id && calls[0].name === 'get_weather', `calls ${short(calls)}`);
  validate(weatherParams, parseJSON(calls[0].args, 'streamed arguments'), 'streamed arguments');
});

await check('tool result turn: assistant tool_calls + role "tool" message is accepted', async () => {
  // the earlier check's call, or a hand-written one when that failed
  toolCall ||= {
    id: 'call_0',
    message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } }] },
  };
  const r = await client.chat.completions.create({
    model: M, max_tokens: 8, temperature: 0, tools,
    messages: [...user('What is the weather in Paris?'), toolCall.message,
      { role: 'tool', tool_call_id: toolCall.id, content: '{"temperature": 18, "unit": "celsius"}' }],
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
});

// ---- logprobs, penalties, prefix cache -----------------------------------------------------------
await check('logprobs: one TokenLogprob per generated token with top_logprobs', async () => {
  const r = await client.chat.completions.create({
    model: M, messages: user('Hi'), max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const lp = r.choices[0].logprobs?.content;
  assert(Array.isArray(lp), `logprobs ${short(r.choices[0].logprobs)}`);
  assert(lp.length === r.usage.completion_tokens, `${lp.length} logprobs for ${r.usage.completion_tokens} tokens`);
  assert(lp.every((t) => t.top_logprobs.length >= 1 && t.top_logprobs.length <= 3), 'top_logprobs count not in 1..3');
  // greedy: the chosen token is the most likely one
  assert(lp.every((t) => t.logprob >= Math.max(...t.top_logprobs.map((x) => x.logprob)) - 1e-4), 'greedy token is not the top logprob');
});

await check('penalties: presence/frequency_penalty accepted; out of range (3) is a 400 naming the field', async () => {
  const r = await client.chat.completions.create({ model: M, messages: user('Hi'), max_tokens: 4, presence_penalty: 0.5, frequency_penalty: 0.5 });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const bad = await post(srv.base, '/v1/chat/completions', { model: M, messages: user('Hi'), max_tokens: 4, presence_penalty: 3 });
  assert(bad.status === 400, `status ${bad.status}`);
  shape('openai#/$defs/Error', bad.json, 'error body');
  assert(bad.json.error.param === 'presence_penalty', `param ${bad.json.error.param}`);
});

await check('prefix reuse: a repeated long prompt reports usage.prompt_tokens_details.cached_tokens > 0', async () => {
  const sys = 'You are a careful assistant. '.repeat(20);
  const req = { model: M, messages: [{ role: 'system', content: sys }, ...user('One.')], max_tokens: 2, temperature: 0 };
  await client.chat.completions.create(req);
  const r = await client.chat.completions.create({ ...req, messages: [{ role: 'system', content: sys }, ...user('Two.')] });
  shape('openai#/$defs/ChatCompletion', r, 'chat.completion');
  const ct = r.usage.prompt_tokens_details?.cached_tokens;
  assert(Number.isInteger(ct) && ct > 0 && ct < r.usage.prompt_tokens, `usage ${JSON.stringify(r.usage)}`);
  return `${ct}/${r.usage.prompt_tokens} cached`;
});

// ---- embeddings, responses ----------------------------------------------------------------------
await check('/v1/embeddings (SDK): CreateEmbeddingResponse shape, one vector per input, same dimension', async () => {
  const r = await client.embeddings.create({ model: M, input: ['hello world', 'a second text'], encoding_format: 'float' });
  shape('openai#/$defs/CreateEmbeddingResponse', r, 'embeddings');
  assert(r.data.length === 2 && r.data.every((d, i) => d.index === i), `data ${short(r.data.map((d) => d.index))}`);
  assert(r.data[0].embedding.length === r.data[1].embedding.length && r.data[0].embedding.length > 0, 'dimensions differ');
  assert(r.data[0].embedding.some((x, i) => x !== r.data[1].embedding[i]), 'two texts, identical vectors');
  return `dim ${r.data[0].embedding.length}`;
});

await check('/v1/responses (SDK): Response shape, output_text', async () => {
  const r = await client.responses.create({ model: M, input: 'Say hi.', max_output_tokens: 8, temperature: 0 });
  shape('openai#/$defs/Response', r, 'response');
  assert(r.status === 'completed' || r.status === 'incomplete', `status ${r.status}`);
  assert(typeof r.output_text === 'string' && r.output_text.length > 0, `output_text ${short(r.output_text)}`);
});

await check('/v1/responses streamed (raw SSE): every event valid, event name = type, ends with response.completed (or response.incomplete when cut at max_output_tokens)', async () => {
  const r = await postStream(srv.base, '/v1/responses', { model: M, input: 'Say hi.', max_output_tokens: 8, stream: true });
  assert(r.status === 200, `status ${r.status}: ${short(r.text)}`);
  assert(r.events.length >= 3, `${r.events.length} events`);
  let seq = -1;
  for (const e of r.events) {
    const d = parseJSON(e.data, `event ${e.event}`);
    shape('openai#/$defs/ResponseStreamEvent', d, `event ${e.event}`);
    assert(e.event === d.type, `event '${e.event}' carries type '${d.type}'`);
    assert(d.sequence_number > seq, 'sequence_number not increasing');
    seq = d.sequence_number;
  }
  const types = r.events.map((e) => JSON.parse(e.data).type);
  const last = JSON.parse(r.events[r.events.length - 1].data);
  const want = last.response?.status === 'incomplete' ? 'response.incomplete' : 'response.completed';
  assert(types[0] === 'response.created' && types[types.length - 1] === want, `types ${types.join(',')} (status ${last.response?.status})`);
  assert(types.filter((t) => t === 'response.completed' || t === 'response.incomplete').length === 1, 'more than one final event');
  assert(types.includes('response.output_text.delta'), 'no output_text.delta');
});

// ---- errors --------------------------------------------------------------------------------------
await check('error: unknown model -> 404 NotFoundError, Error shape, param "model", code model_not_found', async () => {
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages: user('Hi'), max_tokens: 2 });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof OpenAI.NotFoundError, `got ${e.constructor.name}: ${e.message}`);
    shape('openai#/$defs/Error', { error: e.error }, 'error body');
    assert(e.param === 'model' && e.code === 'model_not_found', `param ${e.param}, code ${e.code}`);
  }
});

await check('error: body that is not JSON -> 400, Error shape, invalid_request_error', async () => {
  const r = await post(srv.base, '/v1/chat/completions', '{"model": "qwen3-chat", "messages": [');
  assert(r.status === 400, `status ${r.status}`);
  shape('openai#/$defs/Error', r.json, 'error body');
  assert(r.json.error.type === 'invalid_request_error', `type ${r.json.error.type}`);
});

await check('error: missing messages -> 400 BadRequestError naming param "messages"', async () => {
  try {
    await client.chat.completions.create({ model: M, max_tokens: 2 });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e.message}`);
    shape('openai#/$defs/Error', { error: e.error }, 'error body');
    assert(e.param === 'messages', `param ${e.param}`);
  }
});

await check('error: wrong API key -> 401 AuthenticationError, Error shape', async () => {
  const bad = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.chat.completions.create({ model: M, messages: user('Hi'), max_tokens: 2 });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof OpenAI.AuthenticationError, `got ${e.constructor.name}: ${e.message}`);
    shape('openai#/$defs/Error', { error: e.error }, 'error body');
  }
});

await check('server still healthy: /health queue empty, SIGTERM exits 0', async () => {
  const h = await get(srv.base, '/health');
  assert(h.status === 200 && h.json?.status === 'ok', `health ${h.status} ${short(h.text)}`);
  const ex = await srv.stop();
  assert(ex.code === 0, `exit ${JSON.stringify(ex)}; stderr ${short(srv.stderr(), 500)}`);
});

await finish('openai.mjs');
