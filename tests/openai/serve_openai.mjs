// tests/openai/serve_openai.mjs — the official `openai` client (pinned, installed into build/npm by
// `make test`) against a running `coordinator serve`: models, completions (one prompt and a list
// of them) and chat (whole and streamed, usage), the client's error classes for bad requests and a wrong API key, eight
// concurrent streams, n choices (whole and streamed) with the prompt cache's cached_tokens, and
// greedy output equal to `coordinator generate`. Run by
// tests/integration/test_serve_openai.c:
//   node serve_openai.mjs NPM_DIR phase   (env: MW_URL, MW_MODEL, MW_PROMPT_IDS, MW_REF_IDS,
//                                          MW_API_KEY)
// phase "main" runs everything above; phase "nodefail" (after the harness killed an expert node)
// checks that a request then fails with a server error and a stream with an error event.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(path.resolve(process.argv[2]), 'node_modules', 'x.js'));
const OpenAI = require('openai');
const phase = process.argv[3] || 'main';
// MW_API_KEY: the key the server was started with (every request of the tests sends it)
const client = new OpenAI({ baseURL: process.env.MW_URL + '/v1',
                            apiKey: process.env.MW_API_KEY || 'none', maxRetries: 0,
                            timeout: 120000 });
const model = process.env.MW_MODEL;
const promptIds = JSON.parse(process.env.MW_PROMPT_IDS || '[]');
const refIds = JSON.parse(process.env.MW_REF_IDS || '[]');
const hasChat = process.env.MW_CHAT === '1';

async function collect(stream) {
  let text = '', reasoning = '', usage = null, finish = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text ?? ch.delta?.content ?? '';
      reasoning += ch.delta?.reasoning_content ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, reasoning, usage, finish, chunks };
}

if (phase === 'main') {
  test('models', async () => {
    const list = await client.models.list();
    assert.ok(list.data.some((m) => m.id === model));
    const one = await client.models.retrieve(model);
    assert.equal(one.id, model);
    await assert.rejects(client.models.retrieve('no-such-model'), OpenAI.NotFoundError);
  });

  test('greedy completion equals coordinator generate', async () => {
    const r = await client.completions.create({ model, prompt: promptIds, max_tokens: refIds.length,
                                                temperature: 0, return_token_ids: true,
                                                ignore_eos: true });
    assert.deepEqual(r.choices[0].token_ids, refIds);
    assert.equal(r.usage.prompt_tokens, promptIds.length);
    assert.equal(r.usage.completion_tokens, refIds.length);
    assert.equal(r.usage.total_tokens, promptIds.length + refIds.length);
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test('completion text, whole and streamed, with usage', async () => {
    const args = { model, prompt: 'The quick brown fox', max_tokens: 12, temperature: 0,
                   ignore_eos: true };
    const whole = await client.completions.create(args);
    assert.equal(whole.object, 'text_completion');
    assert.equal(typeof whole.choices[0].text, 'string');
    assert.equal(whole.usage.completion_tokens, 12);
    const s = await collect(await client.completions.create(
        { ...args, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.text, whole.choices[0].text);
    assert.equal(s.finish, 'length');
    assert.deepEqual(s.usage, whole.usage);
    // seeded sampling is reproducible
    const a = await client.completions.create({ ...args, temperature: 0.9, top_p: 0.95, seed: 7 });
    const b = await client.completions.create({ ...args, temperature: 0.9, top_p: 0.95, seed: 7 });
    assert.equal(a.choices[0].text, b.choices[0].text);
  });

  test('logprobs', async () => {
    const r = await client.completions.create({ model, prompt: 'abc', max_tokens: 4, logprobs: 3,
                                                temperature: 0, ignore_eos: true });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 4);
    assert.equal(lp.token_logprobs.length, 4);
    for (const x of lp.token_logprobs) assert.ok(x <= 0);
    for (const t of lp.top_logprobs) assert.ok(Object.keys(t).length >= 1);
  });

  test('logit_bias', async () => {
    const args = { model, prompt: promptIds, max_tokens: 4, temperature: 0, ignore_eos: true,
                   return_token_ids: true };
    const plain = await client.completions.create(args);
    const first = plain.choices[0].token_ids[0];
    const banned = await client.completions.create({ ...args, logit_bias: { [first]: -100 } });
    assert.notEqual(banned.choices[0].token_ids[0], first);
    const forced = await client.completions.create({ ...args, logit_bias: { 77: 100 } });
    assert.deepEqual(forced.choices[0].token_ids, [77, 77, 77, 77]);
    await assert.rejects(client.completions.create({ ...args, logit_bias: { 77: 101 } }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === 'logit_bias');
  });

  test('penalties and top_k', async () => {
    const args = { model, prompt: promptIds, max_tokens: 24, temperature: 0, ignore_eos: true,
                   return_token_ids: true };
    const plain = (await client.completions.create(args)).choices[0].token_ids;
    // a random model's greedy reply repeats itself; OpenAI's penalties change it
    const pen = (await client.completions.create({ ...args, frequency_penalty: 1.5,
                                                   presence_penalty: 1 })).choices[0].token_ids;
    assert.equal(pen.length, 24);
    assert.notDeepEqual(pen, plain);
    // top_k 1 is greedy at any temperature (an extension the client passes through)
    const k1 = await client.completions.create({ ...args, temperature: 1.5, seed: 5, top_k: 1 });
    assert.deepEqual(k1.choices[0].token_ids, plain);
    await assert.rejects(client.completions.create({ ...args, presence_penalty: 2.5 }),
                         (e) => e instanceof OpenAI.BadRequestError &&
                                e.param === 'presence_penalty');
  });

  test('chat', { skip: !hasChat }, async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }];
    const whole = await client.chat.completions.create({ model, messages, max_tokens: 16,
                                                         temperature: 0 });
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].message.role, 'assistant');
    assert.equal(typeof whole.choices[0].message.content, 'string');
    const s = await collect(await client.chat.completions.create(
        { model, messages, max_tokens: 16, temperature: 0, stream: true,
          stream_options: { include_usage: true } }));
    assert.equal(s.text, whole.choices[0].message.content);
    assert.equal(s.reasoning, whole.choices[0].message.reasoning_content ?? '');
    // the same prompt again: its whole blocks come from the prompt cache, the reply is the same
    const plain = (u) => ({ ...u, prompt_tokens_details: undefined });
    assert.deepEqual(plain(s.usage), plain(whole.usage));
    assert.equal(s.usage.prompt_tokens_details.cached_tokens,
                 Math.floor((whole.usage.prompt_tokens - 1) / 32) * 32);
    const lp = await client.chat.completions.create({ model, messages, max_tokens: 3,
                                                      logprobs: true, top_logprobs: 2 });
    assert.ok(lp.choices[0].logprobs.content.length >= 1);
  });

  test('errors raise the right classes', async () => {
    await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }),
                         OpenAI.NotFoundError);
    await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 'ten' }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens');
    await assert.rejects(client.completions.create({ model, prompt: 'x', n: 17 }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
    await assert.rejects(client.completions.create({ model, prompt: 'x', temperature: 5 }),
                         OpenAI.BadRequestError);
    await assert.rejects(client.chat.completions.create({ model, messages: [] }),
                         OpenAI.BadRequestError);
    await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'x' }] }),
                         OpenAI.BadRequestError);
    if (process.env.MW_API_KEY) {
      const stranger = new OpenAI({ baseURL: process.env.MW_URL + '/v1', apiKey: 'sk-wrong',
                                    maxRetries: 0 });
      await assert.rejects(stranger.models.list(),
                           (e) => e instanceof OpenAI.AuthenticationError &&
                                  e.code === 'invalid_api_key');
      await assert.rejects(stranger.completions.create({ model, prompt: 'x', max_tokens: 1 }),
                           OpenAI.AuthenticationError);
    }
    const long = Array.from({ length: 5000 }, () => 5);
    await assert.rejects(client.completions.create({ model, prompt: long, max_tokens: 1 }),
                         (e) => e instanceof OpenAI.BadRequestError &&
                                e.code === 'context_length_exceeded');
  });

  test('several prompts: a choice each, as each alone', async () => {
    const prompts = ['The quick brown fox', 'abc', 'Once upon a time there was'];
    const args = { model, max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true };
    const alone = [];
    for (const prompt of prompts)
      alone.push((await client.completions.create({ ...args, prompt })).choices[0]);
    const all = await client.completions.create({ ...args, prompt: prompts });
    assert.equal(all.choices.length, prompts.length);
    all.choices.forEach((c, i) => {
      assert.equal(c.index, i);
      assert.deepEqual(c.token_ids, alone[i].token_ids);
      assert.equal(c.text, alone[i].text);
    });
    assert.equal(all.usage.completion_tokens, 8 * prompts.length);
    // streamed: each choice's chunks carry its index and end with its own finish_reason
    const stream = await client.completions.create({ ...args, prompt: prompts, stream: true,
                                                     stream_options: { include_usage: true } });
    const text = prompts.map(() => ''), finish = prompts.map(() => null);
    let usage = null;
    for await (const c of stream) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        assert.equal(finish[ch.index], null);
        text[ch.index] += ch.text;
        finish[ch.index] = ch.finish_reason;
      }
    }
    assert.deepEqual(text, alone.map((c) => c.text));
    assert.deepEqual(finish, prompts.map(() => 'length'));
    assert.deepEqual(usage, all.usage);
    // token-id prompts too; one bad prompt refuses the request
    const ids = await client.completions.create({ ...args, prompt: [promptIds, [7, 8]] });
    assert.deepEqual(ids.choices[0].token_ids, refIds.slice(0, 8));
    await assert.rejects(client.completions.create({ ...args, prompt: ['abc', ''] }),
                         OpenAI.BadRequestError);
  });

  test('n choices, whole and streamed; the prompt cache in usage', async () => {
    const prompt = Array.from({ length: 70 }, (_, i) => (i * 37 + 5) % 500);
    const args = { model, prompt, max_tokens: 6, temperature: 1, seed: 3, ignore_eos: true,
                   return_token_ids: true };
    const one = await client.completions.create(args);
    const three = await client.completions.create({ ...args, n: 3 });
    assert.equal(three.choices.length, 3);
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    assert.deepEqual(three.choices[0].token_ids, one.choices[0].token_ids);
    assert.equal(three.usage.prompt_tokens, prompt.length);
    assert.equal(three.usage.completion_tokens, 18);
    // the prompt was computed before: whole blocks of it came from the cache
    assert.ok(three.usage.prompt_tokens_details.cached_tokens >= 32);
    const texts = ['', '', ''];
    let usage = null;
    for await (const c of await client.completions.create(
        { ...args, n: 3, stream: true, stream_options: { include_usage: true } })) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) texts[ch.index] += ch.text ?? '';
    }
    assert.deepEqual(texts, three.choices.map((c) => c.text));
    assert.equal(usage.prompt_tokens, prompt.length);
    await assert.rejects(client.completions.create({ ...args, n: 17 }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
  });

  test('chat with n choices', { skip: !hasChat }, async () => {
    const messages = [{ role: 'user', content: 'Say something.' }];
    const r = await client.chat.completions.create({ model, messages, max_tokens: 5, n: 2,
                                                     temperature: 1, seed: 11 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    const seen = new Set();
    for await (const c of await client.chat.completions.create(
        { model, messages, max_tokens: 5, n: 2, temperature: 1, seed: 11, stream: true }))
      for (const ch of c.choices) seen.add(ch.index);
    assert.deepEqual([...seen].sort(), [0, 1]);
  });

  test('eight concurrent streams', async () => {
    const runs = [];
    for (let i = 0; i < 8; i++)
      runs.push(client.completions.create({ model, prompt: promptIds, max_tokens: refIds.length,
                                            temperature: i % 2 ? 0.8 : 0, seed: i, ignore_eos: true,
                                            return_token_ids: true, stream: true,
                                            stream_options: { include_usage: true } }));
    const streams = await Promise.all(runs);
    const out = await Promise.all(streams.map(async (st) => {
      const ids = [];
      let usage = null;
      for await (const c of st) {
        if (c.usage) usage = c.usage;
        for (const ch of c.choices) ids.push(...(ch.token_ids ?? []));
      }
      return { ids, usage };
    }));
    for (let i = 0; i < 8; i++) {
      assert.equal(out[i].usage.completion_tokens, refIds.length);
      if (i % 2 === 0) assert.deepEqual(out[i].ids, refIds); // greedy: same as alone
    }
  });
}

if (phase === 'nodefail') {
  test('a lost node fails requests loudly and the server answers', async () => {
    await assert.rejects(client.completions.create({ model, prompt: promptIds, max_tokens: 4 }),
                         OpenAI.InternalServerError);
    const stream = await client.completions.create({ model, prompt: promptIds, max_tokens: 4,
                                                     stream: true });
    await assert.rejects(collect(stream), OpenAI.APIError);
    const list = await client.models.list();
    assert.ok(list.data.length === 1);
  });
}
