// tests/data/hf/gen_tokenizer_vectors.mjs — reference ids for hf/tokenizer_json_matches_hf_tokenizers
// from the Hugging Face tokenizers library itself (npm package "tokenizers", the Rust
// implementation's Node binding).  Not run by make test; regenerate with
//   npm install --prefix /tmp/hftok tokenizers@0.23.2
//   NODE_PATH=/tmp/hftok/node_modules node tests/data/hf/gen_tokenizer_vectors.mjs \
//     ../shared/models/tinystories-656k/hf/tokenizer.json > tests/data/hf/tokenizer_vectors.json
// Each variant is the given SentencePiece-style tokenizer.json with some top-level keys
// replaced (and optionally every added token's "normalized" flag), so the test covers the
// Prepend/Replace normalizer, Metaspace pre-tokenizers and normalized or not added tokens.
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

const base = JSON.parse(readFileSync(process.argv[2], "utf8"));
const M = "\u2581";
const meta = (scheme, split) => ({ type: "Metaspace", replacement: M, prepend_scheme: scheme, split });
const variants = [
  { name: "prepend-replace, normalized added tokens (as shipped)", patch: {} },
  { name: "prepend-replace, added tokens not normalized", patch: {}, added_normalized: false },
  { name: "metaspace first, no split", patch: { normalizer: null, pre_tokenizer: meta("first", false),
    decoder: meta("first", false) } },
  { name: "metaspace always, split", patch: { normalizer: null, pre_tokenizer: meta("always", true),
    decoder: meta("always", true) }, added_normalized: false },
  { name: "metaspace never", patch: { normalizer: null, pre_tokenizer: meta("never", false),
    decoder: meta("never", false) } },
];
const cases = [
  "Once upon a time", "Once upon a time, there was a little girl named Lily.", "", " ", "   ",
  " leading space", "trailing space ", "two  spaces", "a\nb\tc", "\n\nOne day.\n",
  "Hello<|end_story|> world", "Hello <|end_story|> world", "<|start_story|>Once upon", "<|start_story|> Once",
  "<|end_story|><|start_story|>", "x<|end_story|>", "Tom said, \"Let's play!\"", "ünïcödé ok", "日本語 text",
  "emoji 🙂 here", "numbers 12345 and 3.14", "it's don't won't", "<unk>", "a<unk>b",
];
const out = { generator: "tests/data/hf/gen_tokenizer_vectors.mjs", tokenizers_npm: "0.23.2",
              source: "models/tinystories-656k/hf/tokenizer.json", variants: [] };
const dir = mkdtempSync(join(tmpdir(), "hftok-"));
for (const v of variants) {
  const t = structuredClone(base);
  Object.assign(t, v.patch);
  if (v.added_normalized !== undefined) for (const a of t.added_tokens) a.normalized = v.added_normalized;
  const path = join(dir, "tokenizer.json");
  writeFileSync(path, JSON.stringify(t));
  const tok = Tokenizer.fromFile(path);
  const res = [];
  for (const s of cases) res.push({ text: s, ids: (await tok.encode(s)).getIds() });
  const rec = { name: v.name, patch: v.patch, cases: res };
  if (v.added_normalized !== undefined) rec.added_normalized = v.added_normalized;
  out.variants.push(rec);
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
