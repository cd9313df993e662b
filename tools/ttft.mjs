#!/usr/bin/env node
// ttft.mjs -- time from process start to the first generated token with llama.cpp, as
// shipped prebuilt in npm node-llama-cpp (the "peer", installed in ./peer by
// ../shared/tools/peer-setup.sh), for comparison with `cinfer run FILE -p TEXT -n 1`.
//
//   node tools/ttft.mjs MODEL.gguf [-p "Once upon a time"] [-t 2] [--peer DIR]
//
// Prints one line: ttft_ms=<performance.now() when the first token is sampled>, i.e.
// milliseconds since node's process start (performance.timeOrigin), so node start-up, module
// loading, getLlama, model load (mmap, weight repacking), context creation, tokenizing and
// evaluating the prompt are all inside, as they are in cinfer's wall time. CPU-only prebuilt
// binary, nothing built or downloaded; greedy sampling; context 512; UV_THREADPOOL_SIZE as
// given in the environment (tools/ttft.sh sets 1, like peer-bench.mjs).
import {pathToFileURL} from "node:url";
import path from "node:path";
import fs from "node:fs";

const args = process.argv.slice(2);
let model = null, prompt = "Once upon a time", threads = 2, peer = null;
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "-p") prompt = args[++i];
    else if (a === "-t") threads = Number(args[++i]);
    else if (a === "--peer") peer = args[++i];
    else if (!model) model = a;
    else { process.stderr.write(`ttft.mjs: unexpected argument ${a}\n`); process.exit(2); }
}
if (!model || !(threads > 0)) {
    process.stderr.write("usage: node tools/ttft.mjs MODEL.gguf [-p TEXT] [-t THREADS] [--peer DIR]\n");
    process.exit(2);
}
const here = path.dirname(new URL(import.meta.url).pathname);
const roots = [peer, path.join(here, "..", "peer"), "peer"].filter(Boolean);
const root = roots.find((d) => fs.existsSync(path.join(d, "node_modules", "node-llama-cpp")));
if (!root) { process.stderr.write(`ttft.mjs: no node_modules/node-llama-cpp under ${roots.join(", ")}\n`); process.exit(1); }
const pkg = path.join(root, "node_modules", "node-llama-cpp");
const main = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8"));
const entry = path.join(pkg, main.exports?.["."]?.import ?? main.exports?.["."]?.default ?? main.main ?? "dist/index.js");
const stages = [];
const stage = (name) => stages.push(`${name} ${performance.now().toFixed(0)}`);
const {getLlama} = await import(pathToFileURL(entry).href);
stage("import");

const llama = await getLlama({gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                              progressLogs: false, maxThreads: 0, logLevel: "error"});
stage("getLlama");
const m = await llama.loadModel({modelPath: path.resolve(model), gpuLayers: 0});
stage("loadModel");
const ctx = await m.createContext({contextSize: 512, threads, sequences: 1});
stage("createContext");
const seq = ctx.getSequence();
const tokens = m.tokenize(prompt); // BOS is added by the sequence below when the model wants it
const input = [...(m.tokens.bos != null && m.tokens.shouldPrependBosToken ? [m.tokens.bos] : []), ...tokens];
const out = await seq.controlledEvaluate(input.map((t, i) => i === input.length - 1
    ? [t, {generateNext: {token: true, options: {temperature: 0}}}] : t));
const t = performance.now();
const tok = out[input.length - 1]?.next?.token;
if (tok == null) { process.stderr.write("ttft.mjs: no token sampled\n"); process.exit(1); }
process.stdout.write(`ttft_ms=${t.toFixed(1)} token=${tok} n_prompt=${input.length}` +
                     (process.env.TTFT_STAGES ? ` (ms since start: ${stages.join(", ")})` : "") + "\n");
process.exit(0); // skip the orderly teardown, which is not part of the first token
