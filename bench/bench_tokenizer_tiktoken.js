// bench/bench_tokenizer_tiktoken.js — js-tiktoken's o200k encode / decode speed on the same
// 100 KB text bench_tokenizer writes, median of RUNS runs (default 7), one JSON line with the
// FNV-1a hash of the ids' little-endian bytes (bench_tokenizer hashes its own the same way).
//   node bench/bench_tokenizer_tiktoken.js build/npm TEXT_FILE [RUNS]
"use strict";
const fs = require("fs");
const path = require("path");
const args = process.argv.slice(2);
if (args.includes("--help") || args.includes("-h") || args.length < 2 || args.length > 3) {
  // the usage is the comment at the top of this file
  const lines = fs.readFileSync(__filename, "utf8").split("\n");
  const top = lines.slice(0, lines.findIndex((l) => !l.startsWith("//")));
  const text = top.map((l) => l.replace(/^\/\/ ?/, "")).join("\n");
  const help = args.includes("--help") || args.includes("-h");
  (help ? console.log : console.error)(text);
  process.exit(help ? 0 : 2);
}
const [npmDir, file, runsArg] = args;
const runs = Number(runsArg || 7);
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`bench_tokenizer_tiktoken.js: RUNS is a positive integer, not '${runsArg}'`);
  process.exit(2);
}
const pkg = path.resolve(npmDir, "node_modules", "js-tiktoken");
const { Tiktoken } = require(path.join(pkg, "dist", "lite.cjs"));
const enc = new Tiktoken(require(path.join(pkg, "dist", "ranks", "o200k_base.cjs")));
const text = fs.readFileSync(file, "utf8");
const bytes = Buffer.byteLength(text);
const e = [], d = [];
let ids;
let back = "";
for (let r = 0; r < runs; r++) {
  let t = process.hrtime.bigint();
  ids = enc.encode(text);
  e.push(Number(process.hrtime.bigint() - t) / 1e6);
  t = process.hrtime.bigint();
  back = enc.decode(ids);
  d.push(Number(process.hrtime.bigint() - t) / 1e6);
}
const med = (v) => v.sort((a, b) => a - b)[v.length >> 1];
let h = 0xcbf29ce484222325n;
for (const id of ids)
  for (let k = 0; k < 4; k++) h = ((h ^ BigInt((id >>> (8 * k)) & 0xff)) * 0x100000001b3n) & 0xffffffffffffffffn;
console.log(JSON.stringify({ reference: "js-tiktoken o200k_base", text_bytes: bytes, tokens: ids.length,
  ids_fnv: h.toString(16).padStart(16, "0"), encode_ms: med(e), encode_MBps: bytes / 1e3 / med(e),
  decode_ms: med(d), decode_MBps: bytes / 1e3 / med(d), decodes_to_text: back === text }));
