#!/usr/bin/env node
// bench/bench_serve.mjs — a load generator for any OpenAI-compatible completions endpoint
// (moewire's `coordinator serve`, llama.cpp's llama-server, ...): at each concurrency level N
// streams each send `rounds` streamed requests back to back (a fixed token-id prompt, a fixed
// number of generated tokens, EOS ignored) and the run reports aggregate generated tokens/s (the
// whole level, prefill included), the decode rate while every stream decodes (comparable with
// llama-batched-bench's S_TG), time to first token and inter-token latency (p50 / p99). Several
// targets are measured level by level in turns, so the host's load moves all of them alike; for a
// moewire target the /metrics page also gives the distinct experts per layer and step against
// random routing's E·(1−(1−k/E)^B). Needs Node 18+ (fetch); no packages. One JSON line per
// (level, target).
//
//   node bench/bench_serve.mjs --target NAME=URL[,MODEL] ... [--streams 1,4,16,64]
//        [--prompt-tokens 128] [--max-tokens 32] [--rounds 2] [--vocab 8000] [--warmup 1]
//        [--text-only MODEL.gguf] [--reverse: the first level in reverse target order]
//        [--salt K: prompts of another sweep; a caller running several gives each its own K]
//   node bench/bench_serve.mjs --table FILE [--base NAME]
//   node bench/bench_serve.mjs --turn2 NEW --target ... [--extra NAME=JSON] [--prompt-tokens 2000]
//        [--max-tokens 1] [--rounds 5]
//
// --turn2 NEW measures a conversation's second turn instead of the levels: per round and target
// (in alternating order) one streamed request of a fresh prompt (turn 1), then one of that prompt
// followed by NEW more tokens (turn 2), one JSON line each round with both times to first token and
// the usage's prompt_tokens_details.cached_tokens; --table then gives per target the median turn-2
// TTFT (range), turn 1's, their ratio, and the ratio over the --base target's turn 2 pass by pass.
// --extra adds JSON fields to a target's requests (llama-server's {"cache_prompt":false}), so one
// server can be two targets.
//
// MODEL defaults to the first id of URL/v1/models. --text-only reads the GGUF's vocabulary and
// sends every request a logit_bias that leaves only the normal tokens whose text is valid UTF-8 on
// its own (-100 on the others, or +100 on these when they are the fewer: the same distribution),
// so a random-weight model writes valid text, which servers that parse their output (llama-server)
// need. Every request must generate max_tokens tokens (usage.completion_tokens), else the run stops:
// a server that ended early would look faster. --table reads such JSON lines (several passes of
// the same levels allowed) and prints per level and target the median aggregate and decode tok/s
// (with the range over passes), TTFT and ITL p50 / p99, both rates over the same target's
// one-stream figures, and over the --base target's (default: llama.cpp when present), each ratio
// taken pass by pass.
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

// --help: the comment at the top of this file, which is the usage.
function usage() {
  const out = [];
  for (const l of readFileSync(new URL(import.meta.url), 'utf8').split('\n').slice(1)) {
    if (!l.startsWith('//')) break;
    out.push(l.replace(/^\/\/ ?/, ''));
  }
  console.log(out.join('\n'));
}

function parseArgs(argv) {
  const o = { targets: [], streams: [1, 4, 16, 64], prompt: 128, max: 32, rounds: 2, vocab: 8000,
              warmup: 1, salt: 0 };
  const ints = { '--prompt-tokens': 'prompt', '--max-tokens': 'max', '--rounds': 'rounds',
                 '--turn2': 'turn2',
                 '--vocab': 'vocab', '--warmup': 'warmup', '--salt': 'salt' };
  const int = (a, v) => {
    if (!/^[0-9]+$/.test(v)) throw new Error(`${a} takes a non-negative integer, not '${v}'`);
    return +v;
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === '--reverse') { o.reverse = true; continue; }
    if (!['--target', '--streams', '--text-only', '--extra'].includes(a) && !(a in ints))
      throw new Error(`unknown option ${a} (--help lists them)`);
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--target') {
      const [name, rest] = [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)];
      const [url, model] = rest.split(',');
      if (!name || !url) throw new Error(`--target ${v}: expected NAME=URL[,MODEL]`);
      o.targets.push({ name, url: url.replace(/\/$/, ''), model });
    } else if (a === '--streams') {
      o.streams = v.split(',').map((x) => int(a, x));
      if (o.streams.includes(0)) throw new Error('--streams: levels of at least one stream');
    } else if (a === '--text-only') o.textOnly = v;
    else if (a === '--extra') {
      const k = v.indexOf('=');
      if (k < 1) throw new Error(`--extra ${v}: expected NAME=JSON`);
      (o.extra ??= {})[v.slice(0, k)] = JSON.parse(v.slice(k + 1));
    }
    else o[ints[a]] = int(a, v);
    i++;
  }
  if (!o.targets.length) throw new Error('at least one --target NAME=URL (--help says more)');
  return o;
}

// The GGUF metadata's tokenizer.ggml.{model,tokens,token_type}: read through a small buffered
// reader, stopping at the tensor infos.
function ggufVocab(file) {
  const fd = openSync(file, 'r');
  let buf = Buffer.alloc(0), at = 0, pos = 0;
  const need = (n) => {
    if (buf.length - at >= n) return;
    const more = Buffer.alloc(Math.max(n, 1 << 22));
    const got = readSync(fd, more, 0, more.length, pos);
    pos += got;
    buf = Buffer.concat([buf.subarray(at), more.subarray(0, got)]);
    at = 0;
    if (buf.length < n) throw new Error(`${file}: truncated GGUF metadata`);
  };
  const u32 = () => (need(4), (at += 4), buf.readUInt32LE(at - 4));
  const u64 = () => (need(8), (at += 8), Number(buf.readBigUInt64LE(at - 8)));
  const str = () => {
    const n = u64();
    need(n);
    at += n;
    return buf.subarray(at - n, at).toString('latin1'); // bytes; decoded by the caller
  };
  const sizes = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const value = (type, keep) => {
    if (type === 8) return str();
    if (type === 9) {
      const et = u32(), n = u64(), out = keep ? [] : null;
      for (let i = 0; i < n; i++) {
        const x = value(et, keep);
        if (keep) out.push(x);
      }
      return out;
    }
    if (!(type in sizes)) throw new Error(`${file}: GGUF value type ${type}`);
    need(sizes[type]);
    at += sizes[type];
    return type === 4 || type === 5 ? buf.readInt32LE(at - 4) : null;
  };
  try {
    need(24);
    if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${file}: not a GGUF file`);
    at = 8;
    u64();
    const nkv = u64(), kv = {};
    const want = ['tokenizer.ggml.model', 'tokenizer.ggml.tokens', 'tokenizer.ggml.token_type'];
    for (let i = 0; i < nkv; i++) {
      const key = str(), type = u32();
      kv[key] = value(type, want.includes(key));
    }
    if (!kv['tokenizer.ggml.tokens']) throw new Error(`${file}: no tokenizer.ggml.tokens`);
    return { model: kv['tokenizer.ggml.model'], tokens: kv['tokenizer.ggml.tokens'],
             types: kv['tokenizer.ggml.token_type'] || [] };
  } finally {
    closeSync(fd);
  }
}

// The bytes a token stands for: GPT-2's byte-level alphabet (tokenizer model "gpt2") or
// SentencePiece's ▁ and <0xXX> byte tokens ("llama").
function tokenBytes(model, text, type) {
  const utf8 = Buffer.from(text, 'latin1'); // GGUF strings are UTF-8
  if (model === 'llama') {
    const m = type === 6 && /^<0x([0-9A-Fa-f]{2})>$/.exec(utf8.toString());
    return m ? Buffer.from([parseInt(m[1], 16)]) : Buffer.from(utf8.toString().replaceAll('\u2581', ' '));
  }
  if (model !== 'gpt2') throw new Error(`--text-only: tokenizer model '${model}' not supported`);
  if (!tokenBytes.inv) {
    const direct = [];
    for (let b = 33; b <= 126; b++) direct.push(b);
    for (let b = 161; b <= 172; b++) direct.push(b);
    for (let b = 174; b <= 255; b++) direct.push(b);
    tokenBytes.inv = new Map(direct.map((b) => [b, b]));
    let n = 0;
    for (let b = 0; b < 256; b++) if (!direct.includes(b)) tokenBytes.inv.set(256 + n++, b);
  }
  const out = [];
  for (const ch of utf8.toString()) {
    const b = tokenBytes.inv.get(ch.codePointAt(0));
    if (b === undefined) return null;
    out.push(b);
  }
  return Buffer.from(out);
}

// logit_bias leaving only normal tokens whose text is non-empty, valid UTF-8 on its own.
function textOnlyBias(file) {
  const v = ggufVocab(file), strict = new TextDecoder('utf-8', { fatal: true });
  const good = [], bad = [];
  v.tokens.forEach((t, id) => {
    const type = v.types[id] ?? 1;
    let ok = type === 1 || (type === 6 && v.model === 'llama');
    if (ok) {
      const b = tokenBytes(v.model, t, type);
      try {
        ok = b !== null && b.length > 0 && strict.decode(b).length > 0;
      } catch {
        ok = false;
      }
    }
    (ok ? good : bad).push(id);
  });
  if (!good.length) throw new Error(`${file}: no token is valid text on its own`);
  const bias = {};
  if (bad.length <= good.length) for (const id of bad) bias[id] = -100;
  else for (const id of good) bias[id] = 100;
  return { bias, good: good.length, bad: bad.length };
}

// A request's prompt: fixed ids, different per request (and per --salt) so no server can reuse a
// cached prefix (llama-server keeps each slot's last prompt and picks the slot that matches best).
function promptIds(n, vocab, salt) {
  const ids = [];
  let x = (Math.imul(salt | 0, 2654435761 | 0) ^ Math.imul((salt / 2 ** 32) | 0, 40503)) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    ids.push(1 + (x % (vocab - 2)));
  }
  return ids;
}

// One streamed request: times of the first token and of each later token.
async function one(t, o, salt, prompt) {
  const body = { model: t.model, prompt: prompt ?? promptIds(o.prompt, o.vocab, salt),
                 max_tokens: o.max, temperature: 0, stream: true, ignore_eos: true,
                 return_token_ids: true, stream_options: { include_usage: true },
                 ...(o.extra && o.extra[t.name]) };
  if (o.bias) body.logit_bias = o.bias;
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
  const got = usage ? usage.completion_tokens : tokens;
  if (got !== o.max)
    throw new Error(`${t.name}: a request generated ${got} tokens, not max_tokens = ${o.max}`);
  return { ttft: first - t0, gaps, times, first, last, tokens: got,
           cached: usage?.prompt_tokens_details?.cached_tokens ?? null };
}

// A conversation's two turns on one target: a fresh prompt, then it and NEW more tokens.
async function turn2(t, o, salt) {
  const p1 = promptIds(o.prompt, o.vocab, salt);
  const a = await one(t, o, salt, p1);
  const b = await one(t, o, salt, p1.concat(promptIds(o.turn2, o.vocab, salt + 7777777)));
  return { bench: 'turn2', target: t.name, prompt_tokens: o.prompt, new_tokens: o.turn2,
           ttft1_ms: +a.ttft.toFixed(1), ttft2_ms: +b.ttft.toFixed(1), cached1: a.cached,
           cached2: b.cached };
}

// --table of --turn2 lines.
function turn2Table(rows, base) {
  const targets = [...new Set(rows.map((r) => r.target))];
  const out = ['| target | turn 2 TTFT ms | turn 1 TTFT ms | turn 2 / turn 1 | cached tokens (turn 2) |' +
               (base ? ` turn 2 × ${base} |` : ''),
               '| --- | --- | --- | --- | --- |' + (base ? ' --- |' : '')];
  for (const t of targets) {
    const rs = rows.filter((r) => r.target === t), bs = rows.filter((r) => r.target === base);
    const cells = [t, fmtRange(rs.map((r) => r.ttft2_ms), 0), fmtRange(rs.map((r) => r.ttft1_ms), 0),
                   fmtRange(rs.map((r) => r.ttft2_ms / r.ttft1_ms), 3),
                   rs[0].cached2 === null ? '—' : fmtRange(rs.map((r) => r.cached2), 0)];
    if (base)
      cells.push(t === base ? '1.00'
                            : fmtRange(rs.slice(0, bs.length).map((r, i) => r.ttft2_ms / bs[i].ttft2_ms), 2));
    out.push(`| ${cells.join(' | ')} |`);
  }
  console.log(out.join('\n'));
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

function median(a) {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function fmtRange(a, digits) {
  const m = median(a).toFixed(digits);
  return a.length > 1 ? `${m} (${Math.min(...a).toFixed(digits)}–${Math.max(...a).toFixed(digits)})`
                      : m;
}

// The table of --table FILE: lines of one (pass, level, target) each; a pass starts again when a
// (level, target) repeats.
function table(file, base) {
  const all = readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
  if (all.some((j) => j.bench === 'turn2')) return turn2Table(all.filter((j) => j.bench === 'turn2'), base);
  const rows = all.filter((j) => j.target && j.streams && j.tok_per_s !== undefined);
  const seen = new Map(); // `${target} ${streams}` -> passes so far
  for (const r of rows) {
    const k = `${r.target} ${r.streams}`;
    r.pass = seen.get(k) ?? 0;
    seen.set(k, r.pass + 1);
  }
  const targets = [...new Set(rows.map((r) => r.target))];
  const levels = [...new Set(rows.map((r) => r.streams))].sort((a, b) => a - b);
  if (!base) base = targets.find((t) => t.startsWith('llama')) ?? null;
  const at = (t, n, pass) => rows.find((r) => r.target === t && r.streams === n && r.pass === pass);
  const cols = ['streams', 'target', 'agg tok/s', 'decode tok/s', 'TTFT p50 / p99 ms',
                'ITL p50 / p99 ms', 'agg × 1 stream', 'decode × 1 stream'];
  if (base) cols.push(`agg × ${base}`, `decode × ${base}`);
  // per pass: this row's field over the same pass's row of another level or target (null: none)
  const ratios = (rs, f, other) => rs.map((r, i) => {
    const o = other(r);
    return o && rs[i][f] && o[f] ? rs[i][f] / o[f] : null;
  }).filter((x) => x !== null);
  const cell = (a, digits) => (a.length ? fmtRange(a, digits) : '—');
  const out = [`| ${cols.join(' | ')} |`, `|${cols.map(() => ' --- ').join('|')}|`];
  for (const n of levels)
    for (const t of targets) {
      const rs = rows.filter((r) => r.target === t && r.streams === n);
      if (!rs.length) continue;
      const m = (f) => median(rs.map((r) => r[f]).filter((x) => x !== null && x !== undefined));
      const one = (r) => (levels[0] === 1 ? at(t, 1, r.pass) : null);
      const cells = [n, t, fmtRange(rs.map((r) => r.tok_per_s), 1),
                     cell(rs.map((r) => r.decode_tok_per_s).filter((x) => x != null), 1),
                     rs[0].ttft_ms_p50 === undefined ? '—' : `${m('ttft_ms_p50').toFixed(0)} / ${m('ttft_ms_p99').toFixed(0)}`,
                     rs[0].itl_ms_p50 == null ? '—' : `${m('itl_ms_p50').toFixed(1)} / ${m('itl_ms_p99').toFixed(1)}`,
                     cell(ratios(rs, 'tok_per_s', one), 2),
                     cell(ratios(rs, 'decode_tok_per_s', one), 2)];
      if (base) {
        const other = (r) => (t === base ? null : at(base, n, r.pass));
        cells.push(cell(ratios(rs, 'tok_per_s', other), 2),
                   cell(ratios(rs, 'decode_tok_per_s', other), 2));
      }
      out.push(`| ${cells.join(' | ')} |`);
    }
  console.log(out.join('\n'));
}

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  usage();
  process.exit(0);
}
const tableAt = process.argv.indexOf('--table');
if (tableAt > 0) {
  if (!process.argv[tableAt + 1]) {
    console.error('bench_serve.mjs: --table needs a file of JSON lines');
    process.exit(2);
  }
  const b = process.argv.indexOf('--base');
  table(process.argv[tableAt + 1], b > 0 ? process.argv[b + 1] : null);
  process.exit(0);
}
let o;
try {
  o = parseArgs(process.argv);
} catch (e) {
  console.error(`bench_serve.mjs: ${e.message}`);
  process.exit(2);
}
let vocabNote = null;
if (o.textOnly) {
  const b = textOnlyBias(o.textOnly);
  o.bias = b.bias;
  vocabNote = { text_tokens: b.good, other_tokens: b.bad, bias_entries: Object.keys(b.bias).length };
}
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
                             rounds: o.rounds, ...(vocabNote && { text_only: vocabNote }) }));
// salts: (--salt, level, target) * 100000 + stream * rounds + round: unique within a sweep, and
// across sweeps given distinct --salt values
let salt = o.salt * (o.streams.length * o.targets.length + 1);
if (o.turn2) {
  for (let r = 0; r < o.rounds; r++) {
    const order = (r + (o.reverse ? 1 : 0)) % 2 ? [...o.targets].reverse() : o.targets;
    for (const t of order) console.log(JSON.stringify(await turn2(t, o, ++salt * 100000 + 31)));
  }
  process.exit(0);
}
for (let li = 0; li < o.streams.length; li++) {
  // each level in turns: the order alternates from level to level
  const order = (li + (o.reverse ? 1 : 0)) % 2 ? [...o.targets].reverse() : o.targets;
  for (const t of order) console.log(JSON.stringify(await level(t, o, o.streams[li], ++salt * 100000)));
}
