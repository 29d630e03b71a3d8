// tests/tiktoken/o200k_cases.js — builds the o200k + harmony vocabulary and the reference
// encodings the tokenizer is checked against, from the js-tiktoken npm package (installed into
// build/npm by the Makefile; nothing is fetched here).
//
//   node tests/tiktoken/o200k_cases.js NPM_DIR OUT_DIR
//
// OUT_DIR/o200k-harmony.gguf: a vocabulary-only GGUF of gpt-oss's vocabulary: o200k_base's
// 199998 ranks as byte-level BPE tokens (tokenizer.ggml.pre "gpt-4o", no merges: tiktoken ranks),
// the harmony special tokens at their ids and reserved control tokens up to 201088.
// OUT_DIR/o200k-harmony-merges.gguf: the same with tokenizer.ggml.merges, as a converted gpt-oss
// GGUF holds it (and as llama.cpp needs it): each multi-byte token's two halves, found by running
// BPE on its bytes with the ranks below its own.
// OUT_DIR/cases.json: [{text, special, ids}] — a few hundred strings (mixed scripts with combining
// marks, code, numbers, emoji, whitespace runs, contractions, random mixtures of all of them) and
// the ids js-tiktoken gives them; `special` strings hold harmony tokens, encoded with them allowed.
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, outDir] = process.argv.slice(2);
if (!npmDir || !outDir) {
  console.error("usage: node o200k_cases.js NPM_DIR OUT_DIR");
  process.exit(2);
}
const pkg = path.resolve(npmDir, "node_modules", "js-tiktoken");
const { Tiktoken } = require(path.join(pkg, "dist", "lite.cjs"));
const ranks = require(path.join(pkg, "dist", "ranks", "o200k_base.cjs"));

const N_VOCAB = 201088;
const HARMONY = {
  "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002,
  "<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
  "<|message|>": 200008, "<|call|>": 200012, "<|endofprompt|>": 200018,
};

// ---- the vocabulary --------------------------------------------------------------------------
const tokens = [];
for (const line of ranks.bpe_ranks.split("\n")) {
  if (!line) continue;
  const [, offStr, ...b64] = line.split(" ");
  let r = Number(offStr);
  for (const t of b64) tokens[r++] = Buffer.from(t, "base64");
}
const N_RANKS = 199998;
for (let i = 0; i < N_RANKS; i++) if (!tokens[i]) throw new Error(`o200k rank ${i} is missing`);
if (tokens.length !== N_RANKS) throw new Error(`o200k has ${tokens.length} ranks, expected ${N_RANKS}`);

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the rest for
// U+0100 upwards in byte order.
const byteChar = [];
{
  let k = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteChar[b] = String.fromCodePoint(printable ? b : 256 + k++);
  }
}
const text = [], type = [];
for (let i = 0; i < N_RANKS; i++) {
  text.push(Array.from(tokens[i], (b) => byteChar[b]).join(""));
  type.push(1);
}
const byId = {};
for (const [s, id] of Object.entries(HARMONY)) byId[id] = s;
for (let id = N_RANKS; id < N_VOCAB; id++) {
  text.push(byId[id] || `<|reserved_${id}|>`);
  type.push(3);
}

// ---- a vocabulary-only GGUF v3 ---------------------------------------------------------------
const parts = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
const str = (s) => { const b = Buffer.from(s, "utf8"); u64(b.length); parts.push(b); };
const kvs = [];
const kvStr = (k, v) => kvs.push(() => { str(k); u32(8); str(v); });
const kvU32 = (k, v) => kvs.push(() => { str(k); u32(4); u32(v); });
const kvBool = (k, v) => kvs.push(() => { str(k); u32(7); parts.push(Buffer.from([v ? 1 : 0])); });
kvStr("general.architecture", "gpt-oss");
kvStr("tokenizer.ggml.model", "gpt2");
kvStr("tokenizer.ggml.pre", "gpt-4o");
kvs.push(() => { str("tokenizer.ggml.tokens"); u32(9); u32(8); u64(text.length); text.forEach(str); });
kvs.push(() => {
  str("tokenizer.ggml.token_type"); u32(9); u32(5); u64(type.length);
  const b = Buffer.alloc(4 * type.length);
  type.forEach((t, i) => b.writeInt32LE(t, 4 * i));
  parts.push(b);
});
kvU32("tokenizer.ggml.bos_token_id", 199998);
kvU32("tokenizer.ggml.eos_token_id", 200002);
kvU32("tokenizer.ggml.padding_token_id", 199999);
kvBool("tokenizer.ggml.add_bos_token", false);
const writeGguf = (name) => {
  parts.length = 0;
  parts.push(Buffer.from("GGUF"));
  u32(3); u64(0); u64(kvs.length);
  kvs.forEach((f) => f());
  fs.writeFileSync(path.join(outDir, name), Buffer.concat(parts));
};
fs.mkdirSync(outDir, { recursive: true });
writeGguf("o200k-harmony.gguf");

// The merge that forms each token: BPE over its bytes, always joining the adjacent pair whose
// join has the lowest rank, stopping before its own rank, leaves exactly two parts.
const rankOf = new Map();
tokens.forEach((b, r) => rankOf.set(b.toString("latin1"), r));
const merges = [];
for (let r = 0; r < N_RANKS; r++) {
  if (tokens[r].length < 2) continue;
  let p = Array.from(tokens[r].toString("latin1"));
  for (;;) {
    let best = -1, bestRank = r;
    for (let i = 0; i + 1 < p.length; i++) {
      const k = rankOf.get(p[i] + p[i + 1]);
      if (k !== undefined && k < bestRank) { best = i; bestRank = k; }
    }
    if (best < 0) break;
    p.splice(best, 2, p[best] + p[best + 1]);
  }
  if (p.length !== 2) throw new Error(`o200k rank ${r} does not come from one merge`);
  const spell = (x) => Array.from(Buffer.from(x, "latin1"), (b) => byteChar[b]).join("");
  merges.push(`${spell(p[0])} ${spell(p[1])}`);
}
kvs.push(() => { str("tokenizer.ggml.merges"); u32(9); u32(8); u64(merges.length); merges.forEach(str); });
writeGguf("o200k-harmony-merges.gguf");

// ---- the strings -----------------------------------------------------------------------------
const base = [
  "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n \n", "\t\t\tindented", "trailing   ",
  "Hello world", " Hello World!", "Hello, world! How's it going? I'm fine, they'll see, we'd've",
  "DON'T SHOUT. It's FINE. THEY'RE here. you've I'M we'LL", "'s 're 've 'd 'm 'll 't",
  "naïve café résumé façade coöperate Ångström", "Straße ẞ Œuvre ĳ ǅ",
  "Привет, мир! Как дела?", "Ελληνικά κείμενα με τόνους", "שלום עולם", "مرحبا بالعالم",
  "नमस्ते दुनिया, यह हिंदी है। क्षत्रिय", "हिन्दी में संयुक्ताक्षर: द्व, श्र, त्र, ज्ञ",
  "สวัสดีครับ ภาษาไทยมีสระบนและล่าง เช่น กี่ ก้ำ", "ภาษาไทย๑๒๓", "বাংলা ভাষা", "தமிழ் மொழி",
  "中文测试：你好，世界！", "日本語のテキスト、カタカナとひらがな。", "한국어 텍스트입니다", "漢字かな交じり文",
  "Tiếng Việt có dấu: Đường phố Hà Nội", "ǅemal Ǆ ǆ", "e\u0301 a\u0308 n\u0303 (combining marks)",
  "Zalgo: Z\u0351\u036b\u0343a\u0310\u0350l\u0357g\u0304o\u0305",
  "123", "1234567890", "3.14159 2,718 1e-10 -42 +7 0x1F 0b1010", "١٢٣٤ ٥٦٧", "①②③ ⅣⅤⅥ",
  "phone: +1 (555) 123-4567, id 000123", "1,000,000.00 $ 99¢ €5 £3 ¥100",
  "😀😃😄 emoji 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️", "🦙.cpp 🤖 robots", "flags 🇫🇷🇩🇪🇯🇵",
  "def f(x):\n    return x ** 2  # square\n", "int main(void) {\n\treturn 0;\n}\n",
  "for (let i = 0; i < n; i++) { a[i] += b[i] * 2; }",
  "<div class=\"x\">Hello &amp; bye</div>", "SELECT * FROM t WHERE a >= 10 AND b <> 'x';",
  "https://example.com/path?q=1&r=two#frag", "user@example.org", "C:\\Users\\name\\file.txt",
  "/usr/local/bin/../lib//x", "{\"key\": [1, 2, 3], \"n\": null}", "a\\nb\\tc", "$$\\frac{a}{b}$$",
  "------====____****", "!!!???...;;;:::", "  \n\n\n   \t\t x", "x\u00a0y\u2009z\u3000w",
  "word\r\nnext\rline", "mixed123abc456DEF", "CamelCaseIdentifierHTTPServer", "snake_case_name",
  "ALLCAPS lowercase MiXeD", "a", "I", "’s ‘quotes’ “double”", "—dash– ‑hyphen",
  "tab\tseparated\tvalues", "Ω≈ç√∫˜µ≤≥÷", "¡¿ «guillemets» „Anführung“",
  "The quick brown fox jumps over the lazy dog.", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
];
const pool = [
  "hello", "World", " the", "'s", "'LL", " नमस्ते", "ภาษาไทย", "你好", "こんにちは", "😀", "👍🏽",
  "12", "3456", " 7", ".", ",", "!!", "\n", "\n\n", "   ", "\t", " ", "x = y + 1;", "()", "{}", "[]",
  "Привет", "café", "e\u0301", "\u0e01\u0e35\u0e48", "क्ष", "—", "…", "#", "//", "/*", "*/", "$",
  "\r\n", "ABC", "dEf", "_", "-", "0", "٣", "ü", "ß", "Ǆ", "\u00a0",
];
let seed = 20260601;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const cases = base.map((t) => ({ text: t, special: false }));
while (cases.length < 360) {
  let s = "";
  const k = 2 + rand(12);
  for (let i = 0; i < k; i++) s += pool[rand(pool.length)];
  cases.push({ text: s, special: false });
}
const specialTexts = [
  "<|start|>user<|message|>Hi there<|end|>",
  "<|start|>assistant<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done!<|return|>",
  "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
  "text<|endoftext|>more text<|endofprompt|>",
  "<|start|>system<|message|>Reasoning: high\n\n# Valid channels: analysis, commentary, final.<|end|>",
  "no specials here, only <|fake|> and < |start| >",
];
for (const t of specialTexts) cases.push({ text: t, special: true });
for (let i = 0; i < 40; i++) {
  const sp = Object.keys(HARMONY);
  let s = "";
  for (let j = 0; j < 6; j++) s += rand(3) ? pool[rand(pool.length)] : sp[rand(sp.length)];
  cases.push({ text: s, special: true });
}

const enc = new Tiktoken(ranks, HARMONY);
for (const c of cases) c.ids = c.special ? enc.encode(c.text, "all") : enc.encode(c.text);
fs.writeFileSync(path.join(outDir, "cases.json"), JSON.stringify(cases));
console.log(`o200k: ${text.length} tokens, ${merges.length} merges, ${cases.length} strings`);
