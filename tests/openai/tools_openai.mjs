// tests/openai/tools_openai.mjs — the official `openai` client (pinned, build/npm) against a
// running `coordinator serve` on a random-weight fixture of one family (MW_FAMILY: qwen3,
// deepseek-v3, kimi-k2, harmony, kimi-k3): a tool-calling loop (a forced call, its result sent back, an
// answer), whole and streamed; the calls' arguments validated by ajv against their tool's schema
// (under tool_choice required, whichever tool was called); for qwen3 also the json_schema outputs
// and a schema feature the server cannot enforce refused with a 400 naming it (neither depends
// on the family). Random weights never call a tool by themselves, so the calls are forced
// (tool_choice required / named), which is what exercises the constraint.
// Run by tests/integration/test_serve_tools.c:
//   node tools_openai.mjs NPM_DIR   (env: MW_URL, MW_MODEL, MW_FAMILY)
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(path.resolve(process.argv[2]), 'node_modules', 'x.js'));
const OpenAI = require('openai');
const Ajv = require('ajv');
const client = new OpenAI({ baseURL: process.env.MW_URL + '/v1', apiKey: 'none', maxRetries: 0,
                            timeout: 300000 });
const model = process.env.MW_MODEL;
const family = process.env.MW_FAMILY ?? 'qwen3';
const familyFree = { skip: family !== 'qwen3' && 'the same for every family: run with qwen3' };
const ajv = new Ajv({ strict: false });

const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] },
                days: { type: 'integer' } },
  required: ['city', 'unit'], additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather of a city',
                                  parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a city',
                                  parameters: { type: 'object', properties: {
                                    tz: { type: 'string', maxLength: 6 } }, required: ['tz'],
                                    additionalProperties: false } } },
];
const base = { model, max_tokens: 400, temperature: 0.7 };

function checkCall(call, name, schema) {
  assert.equal(call.type, 'function');
  assert.ok(typeof call.id === 'string' && call.id.length > 0);
  assert.equal(call.function.name, name);
  const args = JSON.parse(call.function.arguments);
  assert.ok(ajv.validate(schema, args), JSON.stringify(ajv.errors) + ' ' + call.function.arguments);
  return args;
}

async function collect(stream) {
  const calls = [], fragments = [];
  let content = '', finish = null;
  for await (const c of stream) {
    for (const ch of c.choices) {
      content += ch.delta?.content ?? '';
      for (const d of ch.delta?.tool_calls ?? []) {
        if (!calls[d.index]) calls[d.index] = { id: d.id, type: d.type,
                                                function: { name: d.function?.name ?? '',
                                                            arguments: '' } };
        else assert.equal(d.id, undefined); // the id and name come once, first
        calls[d.index].function.arguments += d.function?.arguments ?? '';
        if (d.function?.arguments) fragments[d.index] = (fragments[d.index] ?? 0) + 1;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { content, calls, finish, fragments };
}

test('a tool-calling loop: a forced call, its result, an answer', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r = await client.chat.completions.create({
    ...base, seed: 3, messages, tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  checkCall(msg.tool_calls[0], 'get_weather', weather);
  messages.push(msg);
  messages.push({ role: 'tool', tool_call_id: msg.tool_calls[0].id, content: '{"temp": 21}' });
  const answer = await client.chat.completions.create({ ...base, max_tokens: 8, seed: 4,
                                                        messages, tools });
  assert.equal(typeof answer.choices[0].message.content, 'string');
  assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
});

test('streamed: delta.tool_calls, then the result and an answer', async () => {
  const messages = [{ role: 'user', content: 'Time in Tokyo?' }];
  const s = await collect(await client.chat.completions.create({
    ...base, seed: 5, messages, tools, tool_choice: 'required', stream: true }));
  assert.equal(s.finish, 'tool_calls');
  assert.equal(s.calls.length, 1);
  // the arguments arrive as they are generated, not in one piece when the call closes
  assert.ok(s.fragments[0] > 1, `${s.fragments[0]} argument fragments`);
  // under required with several tools: one of them, with that tool's own arguments
  const tool = tools.find((t) => t.function.name === s.calls[0].function.name);
  assert.ok(tool, s.calls[0].function.name);
  checkCall(s.calls[0], tool.function.name, tool.function.parameters);
  messages.push({ role: 'assistant', content: s.content || null, tool_calls: s.calls });
  messages.push({ role: 'tool', tool_call_id: s.calls[0].id, content: '12:00' });
  const a = await collect(await client.chat.completions.create({
    ...base, max_tokens: 8, seed: 6, messages, tools, tool_choice: 'none', stream: true }));
  assert.equal(a.calls.length, 0);
  assert.ok(['stop', 'length'].includes(a.finish));
});

test('the same call whole and streamed (same seed)', async () => {
  const args = { ...base, seed: 9, messages: [{ role: 'user', content: 'x' }], tools,
                 tool_choice: { type: 'function', function: { name: 'get_time' } } };
  const whole = await client.chat.completions.create(args);
  const s = await collect(await client.chat.completions.create({ ...args, stream: true }));
  assert.equal(s.calls[0].function.arguments, whole.choices[0].message.tool_calls[0].function.arguments);
  checkCall(s.calls[0], 'get_time', tools[1].function.parameters);
});

test('json_schema outputs valid per ajv; json_object is an object', familyFree, async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' },
                  tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 },
                  ok: { type: 'boolean' }, note: { type: ['string', 'null'], maxLength: 5 },
                  code: { type: 'string', pattern: '^[A-Z]{2}-\\d{2,3}$' } },
    required: ['name', 'age', 'tags', 'ok', 'note', 'code'], additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      ...base, seed, messages: [{ role: 'user', content: 'a person' }],
      response_format: { type: 'json_schema', json_schema: { name: 'p', strict: true, schema } } });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(ajv.validate(schema, v), JSON.stringify(ajv.errors) + ' ' + r.choices[0].message.content);
  }
  // any object: a random model's strings may run to max_tokens (then the text is cut short)
  const c = await client.completions.create({ ...base, prompt: 'x', seed: 2,
                                              response_format: { type: 'json_object' } });
  assert.ok(c.choices[0].text.startsWith('{'), c.choices[0].text);
  if (c.choices[0].finish_reason === 'stop')
    assert.equal(typeof JSON.parse(c.choices[0].text), 'object');
  else
    assert.equal(c.choices[0].finish_reason, 'length');
});

test('what cannot be enforced is a 400 naming it', familyFree, async () => {
  await assert.rejects(client.chat.completions.create({
    ...base, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema: {
      type: 'object', properties: { d: { type: 'string', format: 'date-time' } } } } } }),
  (e) => e instanceof OpenAI.BadRequestError && /'format' is not supported/.test(e.message));
});
