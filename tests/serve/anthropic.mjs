// anthropic.mjs — `cinfer serve` driven by the official Anthropic SDK
// (npm `@anthropic-ai/sdk`).  Every response body and stream event is
// validated against schemas/anthropic.json (written from the Anthropic API
// reference and the SDK's types).
//
// Checks: messages non-streaming; streaming (raw SSE: event names, event
// order, every event's shape; SDK: stream helper and finalMessage);
// count_tokens (and that it agrees with usage.input_tokens); a forced
// tool_use whose input validates against the tool's input_schema
// (non-streaming and streamed as input_json_delta) and the tool_result turn;
// stop_sequences; errors for a bad model, bad JSON, a missing field and a
// wrong key.
//
// Usage: CINFER_BIN=build/cinfer node tests/serve/anthropic.mjs   (exit 0 = all passed)
import Anthropic from '@anthropic-ai/sdk';
import {
  MODEL_NAME, API_KEY, startServer, check, assert, finish, hardTimeout, validate, shape, parseJSON, post, get, postStream, short,
} from './lib.mjs';

hardTimeout(90, 'anthropic.mjs');

const srv = await startServer().catch((e) => { console.log(`FAIL - start server: ${e.message}`); process.exit(1); });
const client = new Anthropic({ baseURL: srv.base, apiKey: API_KEY, maxRetries: 0, timeout: 30000 });
const M = MODEL_NAME;
const user = (content) => [{ role: 'user', content }];
const xkey = { 'Content-Type': 'application/json', 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01' };

let firstUsage = null;
await check('messages non-streaming (SDK): Message shape, text block, stop_reason fits usage', async () => {
  const { data, response } = await client.messages
    .create({ model: M, max_tokens: 8, system: 'Be brief.', messages: user('Say hello.'), temperature: 0 })
    .withResponse();
  assert(/application\/json/.test(response.headers.get('content-type')), `content-type ${response.headers.get('content-type')}`);
  shape('anthropic#/$defs/Message', data, 'message');
  assert(data.content.length >= 1 && data.content[0].type === 'text' && data.content[0].text.length > 0, `content ${short(data.content)}`);
  const u = data.usage;
  assert(u.output_tokens >= 1 && u.output_tokens <= 8, `usage ${JSON.stringify(u)}`);
  assert(data.stop_reason === 'end_turn' || (data.stop_reason === 'max_tokens' && u.output_tokens === 8),
    `stop_reason ${data.stop_reason} with ${u.output_tokens} tokens`);
  assert(data.model === M, `model ${data.model}`);
  firstUsage = u;
});

await check('count_tokens (SDK): MessageTokensCount shape, equals usage.input_tokens of the same request', async () => {
  const r = await client.messages.countTokens({ model: M, system: 'Be brief.', messages: user('Say hello.') });
  shape('anthropic#/$defs/MessageTokensCount', r, 'count_tokens');
  assert(firstUsage, 'no usage from the earlier check');
  assert(r.input_tokens === firstUsage.input_tokens, `count ${r.input_tokens} vs usage.input_tokens ${firstUsage.input_tokens}`);
  const longer = await client.messages.countTokens({ model: M, system: 'Be brief.', messages: user('Say hello, and then say goodbye to everyone.') });
  assert(longer.input_tokens > r.input_tokens, `longer prompt counted ${longer.input_tokens} <= ${r.input_tokens}`);
  return `${r.input_tokens} tokens`;
});

/** Check a raw Anthropic event stream: names, order, shapes. Returns {text, json, stop, events}. */
function checkEventStream(events) {
  assert(events.length >= 5, `${events.length} events`);
  const types = [];
  for (const e of events) {
    const d = parseJSON(e.data, `event ${e.event}`);
    assert(e.event === d.type, `SSE event '${e.event}' carries type '${d.type}'`);
    shape('anthropic#/$defs/StreamEvent', d, `event ${d.type}`);
    types.push(d);
  }
  // message_start (block_start delta* block_stop)+ message_delta message_stop, pings anywhere after message_start
  const seq = types.filter((d) => d.type !== 'ping').map((d) => d.type);
  assert(seq[0] === 'message_start', `first event ${seq[0]}`);
  assert(seq[seq.length - 1] === 'message_stop' && seq[seq.length - 2] === 'message_delta', `last events ${seq.slice(-2)}`);
  let open = null, blocks = 0;
  const texts = [], jsons = [];
  for (const d of types.slice(1, -2)) {
    if (d.type === 'ping') continue;
    if (d.type === 'content_block_start') {
      assert(open === null && d.index === blocks, `block_start index ${d.index} (open ${open}, ${blocks} so far)`);
      open = d.index; texts[open] = d.content_block.text || ''; jsons[open] = '';
    } else if (d.type === 'content_block_delta') {
      assert(open === d.index, `delta for block ${d.index}, open ${open}`);
      if (d.delta.type === 'text_delta') texts[open] += d.delta.text;
      if (d.delta.type === 'input_json_delta') jsons[open] += d.delta.partial_json;
    } else if (d.type === 'content_block_stop') {
      assert(open === d.index, `block_stop ${d.index}, open ${open}`);
      open = null; blocks++;
    } else throw new Error(`unexpected ${d.type} inside the message`);
  }
  assert(open === null && blocks >= 1, `${blocks} blocks, open ${open}`);
  const start = types[0].message, delta = types[types.length - 2];
  return { start, delta, blocks: types.filter((d) => d.type === 'content_block_start').map((d) => d.content_block), texts, jsons };
}

await check('messages streaming (raw SSE): named events = type, valid shapes, documented order', async () => {
  const r = await postStream(srv.base, '/v1/messages', { model: M, max_tokens: 10, messages: user('Count to five.'), stream: true }, { headers: xkey });
  assert(r.status === 200, `status ${r.status}: ${short(r.text)}`);
  assert(/^text\/event-stream/.test(r.contentType), `content-type ${r.contentType}`);
  const s = checkEventStream(r.events);
  assert(s.texts[0].length > 0, 'no text streamed');
  assert(s.delta.usage.output_tokens >= 1 && s.delta.usage.output_tokens <= 10, `usage ${JSON.stringify(s.delta.usage)}`);
  return `${r.events.length} events`;
});

await check('messages streaming (SDK stream helper): text events join to finalMessage text, Message shape', async () => {
  const stream = client.messages.stream({ model: M, max_tokens: 10, messages: user('Count to five.'), temperature: 0 });
  let text = '';
  stream.on('text', (t) => { text += t; });
  const msg = await stream.finalMessage();
  shape('anthropic#/$defs/Message', msg, 'finalMessage');
  assert(text.length > 0 && msg.content[0]?.text === text, `streamed ${short(text)} vs final ${short(msg.content)}`);
});

await check('stop_sequences: a stop string generated by the model ends the message with stop_reason stop_sequence', async () => {
  // learn what the model says greedily, then stop on a piece of it
  const first = await client.messages.create({ model: M, max_tokens: 12, messages: user('Go on.'), temperature: 0 });
  const text = first.content[0]?.text || '';
  const stop = text.trim().slice(-4).trim();
  assert(stop.length >= 2, `greedy text too short to pick a stop string: ${short(text)}`);
  const r = await client.messages.create({ model: M, max_tokens: 12, messages: user('Go on.'), temperature: 0, stop_sequences: [stop] });
  shape('anthropic#/$defs/Message', r, 'message');
  assert(r.stop_reason === 'stop_sequence' && r.stop_sequence === stop, `stop_reason ${r.stop_reason}, stop_sequence ${r.stop_sequence} (want ${stop})`);
  assert(!r.content[0].text.includes(stop), 'the stop string is in the text');
});

// ---- tools ----------------------------------------------------------------------------------
const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', minLength: 1, maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { name: 'get_weather', description: 'Current weather in a city', input_schema: weatherSchema },
  { name: 'get_time', description: 'Current time in a time zone', input_schema: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } },
];
let toolUse = null;

await check('tool_use (tool_choice forces get_weather): stop_reason tool_use, input validates against input_schema', async () => {
  const r = await client.messages.create({
    model: M, max_tokens: 200, messages: user('Weather in Paris?'), tools, tool_choice: { type: 'tool', name: 'get_weather' },
  });
  shape('anthropic#/$defs/Message', r, 'message');
  assert(r.stop_reason === 'tool_use', `stop_reason ${r.stop_reason}; content ${short(r.content)}`);
  const tu = r.content.find((b) => b.type === 'tool_use');
  assert(tu && tu.name === 'get_weather' && tu.id, `tool_use block ${short(tu)}`);
  validate(weatherSchema, tu.input, 'tool input');
  toolUse = r;
  return JSON.stringify(tu.input);
});

await check('tool_use (tool_choice any): a call to one of the tools, input valid', async () => {
  const r = await client.messages.create({ model: M, max_tokens: 200, messages: user('Use a tool.'), tools, tool_choice: { type: 'any' } });
  shape('anthropic#/$defs/Message', r, 'message');
  const tu = r.content.filter((b) => b.type === 'tool_use');
  assert(r.stop_reason === 'tool_use' && tu.length >= 1, `stop_reason ${r.stop_reason}; content ${short(r.content)}`);
  for (const t of tu) {
    const tool = tools.find((x) => x.name === t.name);
    assert(tool, `unknown tool ${t.name}`);
    validate(tool.input_schema, t.input, `${t.name} input`);
  }
});

await check('tool_use streamed (raw SSE): tool_use block, input_json_delta joins to input that validates', async () => {
  const r = await postStream(srv.base, '/v1/messages', {
    model: M, max_tokens: 200, messages: user('Weather in Oslo?'), stream: true, tools, tool_choice: { type: 'tool', name: 'get_weather' },
  }, { headers: xkey });
  assert(r.status === 200, `status ${r.status}: ${short(r.text)}`);
  const s = checkEventStream(r.events);
  const i = s.blocks.findIndex((b) => b.type === 'tool_use');
  assert(i >= 0, `blocks ${short(s.blocks)}`);
  assert(s.blocks[i].name === 'get_weather' && s.blocks[i].id, `block ${short(s.blocks[i])}`);
  validate(weatherSchema, parseJSON(s.jsons[i], 'joined partial_json'), 'streamed input');
  assert(s.delta.delta.stop_reason === 'tool_use', `stop_reason ${s.delta.delta.stop_reason}`);
});

await check('tool_result turn: assistant tool_use + user tool_result blocks are accepted', async () => {
  // the earlier check's call, or a hand-written one when that failed
  const tu = toolUse?.content.find((b) => b.type === 'tool_use')
    || { type: 'tool_use', id: 'toolu_0', name: 'get_weather', input: { city: 'Paris', unit: 'celsius' } };
  const r = await client.messages.create({
    model: M, max_tokens: 8, tools,
    messages: [...user('Weather in Paris?'), { role: 'assistant', content: [tu] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: '18 degrees' }] }],
  });
  shape('anthropic#/$defs/Message', r, 'message');
});

// ---- errors ---------------------------------------------------------------------------------------
await check('error: unknown model -> 404 NotFoundError, {type:error, error:{type:not_found_error}}', async () => {
  try {
    await client.messages.create({ model: 'no-such-model', max_tokens: 2, messages: user('Hi') });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof Anthropic.NotFoundError, `got ${e.constructor.name}: ${e.message}`);
    shape('anthropic#/$defs/ErrorResponse', e.error, 'error body');
    assert(e.error?.error?.type === 'not_found_error', `error type ${e.error?.error?.type}`);
  }
});

await check('error: body that is not JSON -> 400 invalid_request_error', async () => {
  const r = await post(srv.base, '/v1/messages', '{"model": "qwen3-chat", "max_tokens": 4, "messages": [', { headers: xkey });
  assert(r.status === 400, `status ${r.status}`);
  shape('anthropic#/$defs/ErrorResponse', r.json, 'error body');
  assert(r.json?.error?.type === 'invalid_request_error', `error type ${r.json?.error?.type}`);
});

await check('error: missing max_tokens -> 400 BadRequestError, invalid_request_error naming max_tokens', async () => {
  try {
    await client.messages.create({ model: M, messages: user('Hi') });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof Anthropic.BadRequestError, `got ${e.constructor.name}: ${e.message}`);
    shape('anthropic#/$defs/ErrorResponse', e.error, 'error body');
    assert(e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.error?.error?.message), `error ${short(e.error)}`);
  }
});

await check('error: count_tokens without messages -> 400 invalid_request_error', async () => {
  try {
    await client.messages.countTokens({ model: M });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof Anthropic.BadRequestError, `got ${e.constructor.name}: ${e.message}`);
    shape('anthropic#/$defs/ErrorResponse', e.error, 'error body');
  }
});

await check('error: wrong API key -> 401 AuthenticationError, authentication_error', async () => {
  const bad = new Anthropic({ baseURL: srv.base, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.messages.create({ model: M, max_tokens: 2, messages: user('Hi') });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof Anthropic.AuthenticationError, `got ${e.constructor.name}: ${e.message}`);
    shape('anthropic#/$defs/ErrorResponse', e.error, 'error body');
    assert(e.error?.error?.type === 'authentication_error', `error type ${e.error?.error?.type}`);
  }
});

await check('server still healthy: /health queue empty, SIGTERM exits 0', async () => {
  const h = await get(srv.base, '/health');
  assert(h.status === 200 && h.json?.status === 'ok', `health ${h.status} ${short(h.text)}`);
  const ex = await srv.stop();
  assert(ex.code === 0, `exit ${JSON.stringify(ex)}; stderr ${short(srv.stderr(), 500)}`);
});

await finish('anthropic.mjs');
