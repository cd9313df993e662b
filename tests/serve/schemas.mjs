// schemas.mjs — the response-shape schemas (schemas/*.json) themselves: each
// accepts the example objects of the OpenAI / Anthropic API references and
// rejects the same objects with one thing broken, so a passing shape check
// elsewhere means something.  No server.
//
// Usage: node tests/serve/schemas.mjs   (exit 0 = all passed)
import { check, assert, finish, ajv } from './lib.mjs';

const clone = (x) => JSON.parse(JSON.stringify(x));
function accepts(id, v) { const f = ajv().getSchema(id); assert(f(v), `${id} rejects the reference example: ${JSON.stringify(f.errors?.slice(0, 2))}`); }
function rejects(id, v, what) { assert(!ajv().getSchema(id)(v), `${id} accepts ${what}`); }
/** Apply each mutation to a copy of example; every result must be rejected. */
function mutants(id, example, muts) {
  accepts(id, example);
  for (const [what, f] of Object.entries(muts)) { const v = clone(example); f(v); rejects(id, v, what); }
  return `${Object.keys(muts).length} broken copies rejected`;
}

// Examples as the API references show them (chat/object, chat/streaming, ...).
const chat = {
  id: 'chatcmpl-123', object: 'chat.completion', created: 1677652288, model: 'gpt-4o-mini', system_fingerprint: 'fp_44709d6fcb',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there, how may I assist you today?', refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21, completion_tokens_details: { reasoning_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } },
};
const toolChat = {
  ...clone(chat),
  choices: [{ index: 0, logprobs: null, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, refusal: null,
    tool_calls: [{ id: 'call_abc123', type: 'function', function: { name: 'get_current_weather', arguments: '{\n"location": "Boston, MA"\n}' } }] } }],
};
const chunk = { id: 'chatcmpl-123', object: 'chat.completion.chunk', created: 1694268190, model: 'gpt-4o-mini', system_fingerprint: 'fp_44709d6fcb',
  choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] };
const usageChunk = { id: 'chatcmpl-123', object: 'chat.completion.chunk', created: 1694268190, model: 'gpt-4o-mini', choices: [],
  usage: { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 } };
const lpChat = { ...clone(chat) };
lpChat.choices[0].logprobs = { content: [{ token: 'Hello', logprob: -0.31725305, bytes: [72, 101, 108, 108, 111], top_logprobs: [{ token: 'Hello', logprob: -0.31725305, bytes: [72, 101, 108, 108, 111] }] }], refusal: null };
const completion = { id: 'cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7', object: 'text_completion', created: 1589478378, model: 'gpt-3.5-turbo-instruct', system_fingerprint: 'fp_44709d6fcb',
  choices: [{ text: '\n\nThis is indeed a test', index: 0, logprobs: null, finish_reason: 'length' }], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } };
const error = { error: { message: "The model 'x' does not exist", type: 'invalid_request_error', param: 'model', code: 'model_not_found' } };
const embeddings = { object: 'list', data: [{ object: 'embedding', embedding: [0.0023064255, -0.009327292, -0.0028842222], index: 0 }], model: 'text-embedding-ada-002', usage: { prompt_tokens: 8, total_tokens: 8 } };
const response = {
  id: 'resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b', object: 'response', created_at: 1741476542, status: 'completed', error: null, incomplete_details: null,
  instructions: null, max_output_tokens: null, model: 'gpt-4.1-2025-04-14',
  output: [{ type: 'message', id: 'msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b', status: 'completed', role: 'assistant',
    content: [{ type: 'output_text', text: 'In a peaceful grove beneath a silver moon...', annotations: [] }] }],
  parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: null, summary: null }, store: true, temperature: 1.0,
  text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], top_p: 1.0, truncation: 'disabled',
  usage: { input_tokens: 36, input_tokens_details: { cached_tokens: 0 }, output_tokens: 87, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 123 },
  user: null, metadata: {},
};
const message = { id: 'msg_013Zva2CMHLNnXjNJJKqJ2EF', type: 'message', role: 'assistant', model: 'claude-sonnet-4-20250514',
  content: [{ type: 'text', text: 'Hi! My name is Claude.' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 2095, output_tokens: 503 } };
const toolMessage = { ...clone(message), stop_reason: 'tool_use',
  content: [{ type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'get_weather', input: { location: 'San Francisco, CA', unit: 'celsius' } }] };
const anthError = { type: 'error', error: { type: 'not_found_error', message: 'The requested resource could not be found.' } };
const events = [
  { type: 'message_start', message: { id: 'msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY', type: 'message', role: 'assistant', content: [], model: 'claude-sonnet-4-20250514', stop_reason: null, stop_sequence: null, usage: { input_tokens: 25, output_tokens: 1 } } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'ping' },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"location": "San Fra' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 15 } },
  { type: 'message_stop' },
];

await check('openai ChatCompletion: reference example accepted, broken copies rejected', () => mutants('openai#/$defs/ChatCompletion', chat, {
  'object chat.completion.chunk': (v) => { v.object = 'chat.completion.chunk'; },
  'no choices': (v) => { delete v.choices; },
  'finish_reason done': (v) => { v.choices[0].finish_reason = 'done'; },
  'finish_reason null': (v) => { v.choices[0].finish_reason = null; },
  'no logprobs key': (v) => { delete v.choices[0].logprobs; },
  'role user': (v) => { v.choices[0].message.role = 'user'; },
  'no refusal key': (v) => { delete v.choices[0].message.refusal; },
  'created as string': (v) => { v.created = '1677652288'; },
  'usage without total_tokens': (v) => { delete v.usage.total_tokens; },
  'negative tokens': (v) => { v.usage.prompt_tokens = -1; },
}));
await check('openai ChatCompletion with tool_calls and with logprobs: accepted; broken copies rejected', () => {
  accepts('openai#/$defs/ChatCompletion', lpChat);
  return mutants('openai#/$defs/ChatCompletion', toolChat, {
    'arguments as object': (v) => { v.choices[0].message.tool_calls[0].function.arguments = { location: 'Boston' }; },
    'no tool call id': (v) => { delete v.choices[0].message.tool_calls[0].id; },
    'type tool': (v) => { v.choices[0].message.tool_calls[0].type = 'tool'; },
  });
});
await check('openai ChatCompletionChunk: examples accepted, broken copies rejected', () => {
  accepts('openai#/$defs/ChatCompletionChunk', usageChunk);
  return mutants('openai#/$defs/ChatCompletionChunk', chunk, {
    'object chat.completion': (v) => { v.object = 'chat.completion'; },
    'message instead of delta': (v) => { v.choices[0].message = v.choices[0].delta; delete v.choices[0].delta; },
    'no finish_reason key': (v) => { delete v.choices[0].finish_reason; },
    'content as number': (v) => { v.choices[0].delta.content = 5; },
    'tool_call without index': (v) => { v.choices[0].delta.tool_calls = [{ id: 'c', function: { arguments: '{' } }]; },
  });
});
await check('openai Completion, Error, embeddings, Response: examples accepted, broken copies rejected', () => {
  mutants('openai#/$defs/Completion', completion, { 'no text': (v) => { delete v.choices[0].text; }, 'object completion': (v) => { v.object = 'completion'; } });
  mutants('openai#/$defs/Error', error, { 'flat error': (v) => { v.message = v.error.message; delete v.error; }, 'no param key': (v) => { delete v.error.param; } });
  mutants('openai#/$defs/CreateEmbeddingResponse', embeddings, { 'embedding of strings': (v) => { v.data[0].embedding = ['a']; }, 'no usage': (v) => { delete v.usage; } });
  return mutants('openai#/$defs/Response', response, {
    'no metadata': (v) => { delete v.metadata; },
    'output_text without annotations': (v) => { delete v.output[0].content[0].annotations; },
    'status done': (v) => { v.status = 'done'; },
    'usage without details': (v) => { delete v.usage.input_tokens_details; },
  });
});
await check('anthropic Message (text and tool_use), ErrorResponse: examples accepted, broken copies rejected', () => {
  accepts('anthropic#/$defs/Message', toolMessage);
  mutants('anthropic#/$defs/ErrorResponse', anthError, { 'unknown error type': (v) => { v.error.type = 'oops'; }, 'no type': (v) => { delete v.type; } });
  rejects('anthropic#/$defs/Message', { ...clone(toolMessage), content: [{ type: 'tool_use', id: 't', name: 'x', input: '{"a":1}' }] }, 'tool input as a string');
  return mutants('anthropic#/$defs/Message', message, {
    'no stop_sequence key': (v) => { delete v.stop_sequence; },
    'stop_reason stop': (v) => { v.stop_reason = 'stop'; },
    'role user': (v) => { v.role = 'user'; },
    'text block without text': (v) => { delete v.content[0].text; },
    'usage without output_tokens': (v) => { delete v.usage.output_tokens; },
    'content as string': (v) => { v.content = 'Hi'; },
  });
});
await check('anthropic stream events: reference events accepted, broken copies rejected', () => {
  for (const e of events) accepts('anthropic#/$defs/StreamEvent', e);
  const bad = {
    'message_start with a stop_reason': { ...clone(events[0]), message: { ...clone(events[0].message), stop_reason: 'end_turn' } },
    'text_delta without text': { type: 'content_block_delta', index: 0, delta: { type: 'text_delta' } },
    'delta without index': { type: 'content_block_delta', delta: { type: 'text_delta', text: 'x' } },
    'message_delta without usage': { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null } },
    'unknown event type': { type: 'message_end' },
  };
  for (const [what, v] of Object.entries(bad)) rejects('anthropic#/$defs/StreamEvent', v, what);
  return `${events.length} events accepted, ${Object.keys(bad).length} rejected`;
});

await finish('schemas.mjs');
