// bench/bench_tokenizer_tiktoken.js — js-tiktoken's o200k encode / decode speed on the same
// 100 KB text bench_tokenizer writes (MW_TK_TEXT_OUT), median of 7 runs, one JSON line.
//   node bench/bench_tokenizer_tiktoken.js build/npm TEXT_FILE
"use strict";
const fs = require("fs");
const path = require("path");
const [npmDir, file] = process.argv.slice(2);
const pkg = path.resolve(npmDir, "node_modules", "js-tiktoken");
const { Tiktoken } = require(path.join(pkg, "dist", "lite.cjs"));
const enc = new Tiktoken(require(path.join(pkg, "dist", "ranks", "o200k_base.cjs")));
const text = fs.readFileSync(file, "utf8");
const bytes = Buffer.byteLength(text);
const e = [], d = [];
let ids;
for (let r = 0; r < 7; r++) {
  let t = process.hrtime.bigint();
  ids = enc.encode(text);
  e.push(Number(process.hrtime.bigint() - t) / 1e6);
  t = process.hrtime.bigint();
  enc.decode(ids);
  d.push(Number(process.hrtime.bigint() - t) / 1e6);
}
const med = (v) => v.sort((a, b) => a - b)[v.length >> 1];
console.log(JSON.stringify({ reference: "js-tiktoken o200k_base", text_bytes: bytes, tokens: ids.length,
  encode_ms: med(e), encode_MBps: bytes / 1e3 / med(e), decode_ms: med(d), decode_MBps: bytes / 1e3 / med(d) }));
