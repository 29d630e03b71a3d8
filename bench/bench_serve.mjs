#!/usr/bin/env node
// bench/bench_serve.mjs — a load generator for any OpenAI-compatible completions endpoint
// (moewire's `coordinator serve`, llama.cpp's llama-server, ...): at each concurrency level N
// streams each send `rounds` streamed requests back to back (a fixed token-id prompt, a fixed
// number of generated tokens, EOS ignored) and the run reports aggregate generated tokens/s (the
// whole level, prefill included), the decode rate while every stream decodes (comparable with
// llama-batched-bench's S_TG), time to first token and inter-token latency (p50 / p99). Several targets are measured level by
// level in turns, so the host's load moves all of them alike; for a moewire target the /metrics
// page also gives the distinct experts per layer and step against random routing's
// E·(1−(1−k/E)^B). Needs Node 18+ (fetch); no packages. One JSON line per (level, target).
//
//   node bench/bench_serve.mjs --target NAME=URL[,MODEL] ... [--streams 1,4,16,64]
//        [--prompt-tokens 128] [--max-tokens 32] [--rounds 2] [--vocab 8000] [--warmup 1]
//
// MODEL defaults to the first id of URL/v1/models.
import { performance } from 'node:perf_hooks';

function parseArgs(argv) {
  const o = { targets: [], streams: [1, 4, 16, 64], prompt: 128, max: 32, rounds: 2, vocab: 8000,
              warmup: 1 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === '--target') {
      const [name, rest] = [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)];
      const [url, model] = rest.split(',');
      if (!name || !url) throw new Error(`--target ${v}: expected NAME=URL[,MODEL]`);
      o.targets.push({ name, url: url.replace(/\/$/, ''), model });
    } else if (a === '--streams') o.streams = v.split(',').map(Number);
    else if (a === '--prompt-tokens') o.prompt = +v;
    else if (a === '--max-tokens') o.max = +v;
    else if (a === '--rounds') o.rounds = +v;
    else if (a === '--vocab') o.vocab = +v;
    else if (a === '--warmup') o.warmup = +v;
    else throw new Error(`unknown option ${a} (see the comment at the top)`);
    i++;
  }
  if (!o.targets.length) throw new Error('at least one --target NAME=URL');
  return o;
}

// A request's prompt: fixed ids, different per request so no server can reuse a cached prefix.
function promptIds(n, vocab, salt) {
  const ids = [];
  let x = (salt * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    ids.push(1 + (x % (vocab - 2)));
  }
  return ids;
}

// One streamed request: times of the first token and of each later token.
async function one(t, o, salt) {
  const body = { model: t.model, prompt: promptIds(o.prompt, o.vocab, salt), max_tokens: o.max,
                 temperature: 0, stream: true, ignore_eos: true, return_token_ids: true,
                 stream_options: { include_usage: true } };
  const t0 = performance.now();
  const res = await fetch(t.url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${t.name}: HTTP ${res.status}: ${await res.text()}`);
  const dec = new TextDecoder();
  let buf = '', first = null, last = null, tokens = 0, usage = null;
  const gaps = [], times = [];
  for await (const part of res.body) {
    buf += dec.decode(part, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k);
      buf = buf.slice(k + 2);
      for (const line of ev.split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        const c = JSON.parse(line.slice(6));
        if (c.error) throw new Error(`${t.name}: ${JSON.stringify(c.error)}`);
        if (c.usage) usage = c.usage;
        const ch = c.choices && c.choices[0];
        if (!ch) continue;
        // tokens in this chunk: moewire lists them; llama-server sends one per chunk
        const n = Array.isArray(ch.token_ids) ? ch.token_ids.length : (ch.text ? 1 : 0);
        if (!n) continue;
        const now = performance.now();
        if (first === null) first = now;
        else for (let j = 0; j < n; j++) gaps.push((now - last) / n);
        last = now;
        tokens += n;
        for (let j = 0; j < n; j++) times.push(now);
      }
    }
  }
  return { ttft: first - t0, gaps, times, first, last,
           tokens: usage ? usage.completion_tokens : tokens };
}

function pct(a, p) {
  if (!a.length) return null;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// /metrics of a moewire server: the unique-experts histogram's sum and count, and the uniform
// expectation over the same observations; null elsewhere.
async function experts(t) {
  try {
    const r = await fetch(t.url + '/metrics');
    if (!r.ok) return null;
    const txt = await r.text();
    const get = (n) => {
      const m = txt.match(new RegExp('^' + n + ' (\\S+)$', 'm'));
      return m ? +m[1] : null;
    };
    const sum = get('moewire_step_unique_experts_sum');
    if (sum === null) return null;
    return { sum, count: get('moewire_step_unique_experts_count'),
             uniform: get('moewire_step_unique_experts_uniform_total'),
             rows: get('moewire_batch_rows_sum'), steps: get('moewire_batch_rows_count') };
  } catch {
    return null;
  }
}

async function level(t, o, streams, saltBase) {
  const before = await experts(t);
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: streams }, async (_, w) => {
    const out = [];
    for (let r = 0; r < o.rounds; r++) out.push(await one(t, o, saltBase + w * o.rounds + r));
    return out;
  }));
  const wall = (performance.now() - t0) / 1000;
  const after = await experts(t);
  const all = results.flat();
  // the window in which every stream was decoding: from the last first token of the first round
  // to the first end of the last round; the tokens generated in it per second is the decode rate
  // with all N sequences in the batch (llama-batched-bench's S_TG), free of the prefill
  const ws = Math.max(...results.map((r) => r[0].first));
  const we = Math.min(...results.map((r) => r[r.length - 1].last));
  const inWindow = all.reduce((c, x) => c + x.times.filter((u) => u > ws && u <= we).length, 0);
  const gaps = all.flatMap((x) => x.gaps), ttft = all.map((x) => x.ttft);
  const tokens = all.reduce((s, x) => s + x.tokens, 0);
  const line = { target: t.name, streams, requests: all.length, prompt_tokens: o.prompt,
                 max_tokens: o.max, wall_s: +wall.toFixed(3), tokens,
                 tok_per_s: +(tokens / wall).toFixed(2),
                 decode_tok_per_s: we > ws ? +((inWindow / (we - ws)) * 1000).toFixed(2) : null,
                 ttft_ms_p50: +pct(ttft, 50).toFixed(1), ttft_ms_p99: +pct(ttft, 99).toFixed(1),
                 itl_ms_p50: gaps.length ? +pct(gaps, 50).toFixed(2) : null,
                 itl_ms_p99: gaps.length ? +pct(gaps, 99).toFixed(2) : null };
  if (before && after && after.count > before.count) {
    const n = after.count - before.count;
    line.unique_experts_per_layer_step = +((after.sum - before.sum) / n).toFixed(2);
    line.uniform_expectation = +((after.uniform - before.uniform) / n).toFixed(2);
    line.unique_vs_uniform = +((after.sum - before.sum) / (after.uniform - before.uniform)).toFixed(3);
    line.rows_per_step = +((after.rows - before.rows) / (after.steps - before.steps)).toFixed(2);
  }
  return line;
}

const o = parseArgs(process.argv);
for (const t of o.targets) {
  if (!t.model) {
    const r = await (await fetch(t.url + '/v1/models')).json();
    t.model = r.data[0].id;
  }
  for (let i = 0; i < o.warmup; i++) await one(t, o, 1e6 + i);
}
console.log(JSON.stringify({ bench: 'serve', date: new Date().toISOString(),
                             targets: o.targets.map((t) => ({ name: t.name, url: t.url,
                                                              model: t.model })),
                             streams: o.streams, prompt_tokens: o.prompt, max_tokens: o.max,
                             rounds: o.rounds }));
let salt = 0;
for (let li = 0; li < o.streams.length; li++) {
  // each level in turns: the order alternates from level to level
  const order = li % 2 ? [...o.targets].reverse() : o.targets;
  for (const t of order) console.log(JSON.stringify(await level(t, o, o.streams[li], ++salt * 100000)));
}
