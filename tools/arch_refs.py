#!/usr/bin/env python3
"""Make tests/data/arch/: llama.cpp's outputs for every tools/archgen.c test model.

usage: arch_refs.py --archgen BIN --cinfer BIN --ref-json BIN --embed-ref BIN --backend-dir DIR
                    --llama-src DIR --vocab-from FILE.gguf --work DIR --out DIR
                    [--llama-quantize BIN] [--stories-embeddings FILE] [NAME ...]
       arch_refs.py --tables MANIFEST     print the README's tables

For each family (all of `archgen --list`, or the NAMEs given) it writes the
F32 model with archgen, its Q8_0 and Q4_0 variants with `cinfer quantize`, and
runs llama.cpp on all three: ref-json (../shared/tools/refgen/ref-json.c, the
libllama client every reference in ../shared/reference was made with) for the
decoders, tools/ref_embed.c for the encoders (pooled embeddings).  Output, in
--out: NAME.json, NAME-q8_0.json, NAME-q4_0.json and manifest.json (merged:
families not named keep their entries).  tools/arch-refs.sh is the usual way
in; tests/data/arch/README.md documents the files.  Standard library only.
"""
import argparse, hashlib, json, os, re, struct, subprocess, sys

PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Once upon a time, there was a little girl named Lily. She lived in a small house near "
    "the woods with her mom and her dog, Max. Every day, they went for a walk.",
]
STEPS, N_CTX = 32, 512
VARIANTS = ["f32", "q8_0", "q4_0"]
# further cinfer-quantized variants of some families: gpt-oss ships MXFP4 experts
# (llama-quantize MXFP4_MOE: the 3-D expert tensors MXFP4, the rest Q8_0)
EXTRA_VARIANTS = {"gpt-oss": ["mxfp4_moe"]}
ENCODERS = {"bert", "nomic-bert"}  # no logits: pooled embeddings from ref_embed


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def short(x):
    """shortest decimal that reads back (strtod, then a cast to float) as the same float32"""
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("non-finite value in a reference")
    for p in range(1, 10):
        s = "%.*g" % (p, x)
        if f32(float(s)) == x:
            return s
    return "%.9g" % x


def ser(v):
    """compact JSON with float32 values in their shortest form"""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return short(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(ser(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + ser(x) for k, x in v.items()) + "}"
    raise TypeError(type(v))


def write_doc(path, doc, big_list_key):
    """one line per top-level key, one line per element of doc[big_list_key]"""
    lines = []
    for k, v in doc.items():
        if k == big_list_key:
            lines.append(json.dumps(k) + ":[\n" + ",\n".join(ser(x) for x in v) + "]")
        else:
            lines.append(json.dumps(k) + ":" + ser(v))
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (os.path.basename(cmd[0]), r.returncode, r.stderr.strip()[-800:]))
    return r.stdout


def git(src, *args):
    return subprocess.run(["git", "-C", src] + list(args), capture_output=True, text=True, check=True).stdout.strip()


def cpu_variant(a, model):
    """the libggml-cpu-*.so that ggml_backend_load_all_from_path picked on this machine"""
    env = dict(os.environ, DUMP_LOGITS_VERBOSE="1")
    r = subprocess.run([a.ref_json, "-m", model, "-p", "a", "-n", "1", "--backend-dir", a.backend_dir],
                       capture_output=True, text=True, env=env)
    m = re.search(r"libggml-cpu-([\w]+)\.so", r.stderr)
    return m.group(1) if m else "unknown"


def decoder_refs(a, model):
    cmd = [a.ref_json, "-m", model, "-t", "1", "-n", str(STEPS), "-c", str(N_CTX), "--backend-dir", a.backend_dir]
    for p in PROMPTS:
        cmd += ["-p", p]
    out = [json.loads(l) for l in run(cmd).splitlines() if l.strip()]
    if len(out) != len(PROMPTS):
        raise RuntimeError("ref-json printed %d results for %d prompts" % (len(out), len(PROMPTS)))
    return out


def gap(step):
    t = step["top5_logits"]
    return t[0] - t[1]


def compact_prompt(p, full):
    """the parts parity tests use: F32 keeps every greedy step's top 5, the
    quantized variants the greedy ids and each step's top-1/top-2 gap"""
    q = dict(prompt=p["prompt"], n_prompt_tokens=p["n_prompt_tokens"], prompt_ids=p["prompt_ids"],
             logits_last=[float(x) for x in p["logits_last"]], greedy_ids=p["greedy_ids"])
    if full:
        q["greedy_steps"] = [dict(top5_ids=s["top5_ids"], top5_logits=[float(x) for x in s["top5_logits"]])
                             for s in p["greedy_steps"]]
        q["greedy_text_hex"] = p["greedy_text_hex"]
    else:
        q["greedy_top12_gap"] = [f32(gap(s)) for s in p["greedy_steps"]]
    q["min_top12_gap"] = f32(min(gap(s) for s in p["greedy_steps"]))
    return q


def rms(v):
    return (sum(x * x for x in v) / len(v)) ** 0.5


def compare(ref, other):
    """how far a quantized run is from the F32 run, per prompt"""
    out = []
    for p, q in zip(ref, other):
        x, y = p["logits_last"], q["logits_last"]
        d = max(abs(u - v) for u, v in zip(x, y))
        dot = sum(u * v for u, v in zip(x, y))
        cos = dot / ((sum(u * u for u in x) * sum(v * v for v in y)) ** 0.5)
        same = next((i for i, (u, v) in enumerate(zip(p["greedy_ids"], q["greedy_ids"])) if u != v), len(p["greedy_ids"]))
        out.append(dict(max_abs_over_rms=float("%.3g" % (d / rms(x))), cosine=float("%.9f" % cos),
                        greedy_identical_prefix=same))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for k in ("archgen", "cinfer", "ref-json", "embed-ref", "backend-dir", "llama-src", "vocab-from", "work", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--llama-quantize", default=None,
                    help="llama.cpp's llama-quantize: check that cinfer quantize writes the same bytes, every family")
    ap.add_argument("--stories-embeddings", default=None, metavar="FILE",
                    help="also write llama.cpp's pooled embeddings of --vocab-from (stories260K) to FILE")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()

    fams = [l.split("\t") for l in run([a.archgen, "--list"]).splitlines() if l.strip()]
    known = {f[0] for f in fams}
    for n in a.names:
        if n not in known:
            sys.exit("arch_refs: unknown family '%s'" % n)
    todo = [f for f in fams if not a.names or f[0] in a.names]
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    man_path = os.path.join(a.out, "manifest.json")
    manifest = json.load(open(man_path)) if os.path.exists(man_path) else {}
    commit = git(a.llama_src, "rev-parse", "HEAD")
    llama_cpp = dict(commit=commit, commit_date=git(a.llama_src, "log", "-1", "--format=%cI"),
                     build="node-llama-cpp 3.22.1 prebuilt CPU binaries (llama.cpp release v0.5.0)",
                     cpu_backend=cpu_variant(a, a.vocab_from))
    settings = dict(threads=1, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, kv_cache_type="f32", flash_attn=False,
                    add_special=True, parse_special=False, n_greedy=STEPS)
    families = manifest.get("families", {})
    for name, arch, exercises in todo:
        files = {}
        f32_path = os.path.join(a.work, name + ".gguf")
        run([a.archgen, "-o", a.work, "--vocab-from", a.vocab_from, name])
        files["f32"] = f32_path
        variants = VARIANTS + EXTRA_VARIANTS.get(name, [])
        quantized = variants[1:]
        for t in quantized:
            files[t] = os.path.join(a.work, "%s-%s.gguf" % (name, t))
            run([a.cinfer, "quantize", f32_path, files[t], "--type", t])
        same_as_peer = {}
        if a.llama_quantize:
            for t in quantized:
                peer = os.path.join(a.work, "%s-%s-llama-quantize.gguf" % (name, t))
                run([a.llama_quantize, f32_path, peer, t.upper()])
                same_as_peer[t] = sha256(peer) == sha256(files[t])
                os.remove(peer)
                if not same_as_peer[t]:
                    print("warning: %s %s: cinfer quantize and llama-quantize wrote different files" % (name, t))
        entry = dict(arch=arch, exercises=exercises, n_params=None, files={}, refs={})
        results = {}
        for v in variants:
            path = files[v]
            entry["files"][v] = dict(sha256=sha256(path), size=os.path.getsize(path))
            if v in same_as_peer:
                entry["files"][v]["same_as_llama_quantize"] = same_as_peer[v]
            rel = "build/arch-models/%s.gguf" % name if v == "f32" else "build/arch-models/%s/%s.gguf" % (v, name)
            ref_name = name + ("" if v == "f32" else "-" + v) + ".json"
            doc = dict(model=rel, variant=v, model_sha256=entry["files"][v]["sha256"], model_size=entry["files"][v]["size"],
                       llama_cpp=llama_cpp, settings=settings)
            if name in ENCODERS:
                res = json.loads(run([a.embed_ref, "-m", path, "--backend-dir", a.backend_dir] +
                                     sum([["-p", p] for p in PROMPTS], [])))
                doc["pooling_gguf"] = res["pooling_gguf"]
                doc["n_embd"] = res["n_embd"]
                doc["notes"] = ["embeddings: llama.cpp pooled output (llama_get_embeddings_seq), not normalised; "
                                "one per pooling type, the GGUF's own (pooling_gguf) and the others forced through "
                                "llama_context_params.pooling_type"]
                doc["prompts"] = res["prompts"]
                write_doc(os.path.join(a.out, ref_name), doc, "prompts")
                results[v] = res["prompts"]
            else:
                res = decoder_refs(a, path)
                results[v] = res
                doc["n_vocab"] = len(res[0]["logits_last"])
                doc["prompts"] = [compact_prompt(p, v == "f32") for p in res]
                write_doc(os.path.join(a.out, ref_name), doc, "prompts")
                entry.setdefault("min_top12_gap", {})[v] = [float("%.3g" % min(gap(s) for s in p["greedy_steps"])) for p in res]
            entry["refs"][v] = ref_name
        if name not in ENCODERS:
            entry["logit_rms"] = [float("%.3g" % rms(p["logits_last"])) for p in results["f32"]]
            entry["vs_f32"] = {v: compare(results["f32"], results[v]) for v in quantized}
        entry["n_params"] = int(run([a.archgen, "-o", a.work, "--vocab-from", a.vocab_from, name]).split("\t")[2].split()[0])
        families[name] = entry
        print("ok %-16s %s" % (name, " ".join("%s:%s" % (v, entry["min_top12_gap"][v]) for v in variants)
                                 if "min_top12_gap" in entry else "(embeddings)"), flush=True)
    if a.stories_embeddings:
        stories_embeddings(a, llama_cpp, settings)
    order = [f[0] for f in fams]
    manifest = dict(
        generator="tools/archgen.c (make arch-models); references by tools/arch_refs.py (tools/arch-refs.sh)",
        vocab_from="../shared/models/stories260K/stories260K.gguf", vocab_sha256=sha256(a.vocab_from),
        prompts=PROMPTS, llama_cpp=llama_cpp, settings=settings,
        families={k: families[k] for k in order if k in families})
    with open(man_path, "w") as f:
        f.write(json.dumps(manifest, indent=1) + "\n")


SERVER_PROMPT = "Once upon a time, there was a little dog who liked to run."


def stories_embeddings(a, llama_cpp, settings):
    """llama.cpp's mean/CLS/last pooled embeddings of stories260K (a decoder:
    its GGUF selects no pooling) for the reference prompts and the sentence the
    server's embeddings tests use"""
    prompts = PROMPTS + [SERVER_PROMPT]
    res = json.loads(run([a.embed_ref, "-m", a.vocab_from, "--backend-dir", a.backend_dir] +
                         sum([["-p", p] for p in prompts], [])))
    doc = dict(model="../shared/models/stories260K/stories260K.gguf", model_sha256=sha256(a.vocab_from),
               model_size=os.path.getsize(a.vocab_from), llama_cpp=llama_cpp,
               settings=dict(settings, embeddings=True, n_greedy=0), pooling_gguf=res["pooling_gguf"],
               n_embd=res["n_embd"],
               notes=["embeddings: llama.cpp pooled output (llama_get_embeddings_seq) with the pooling type forced "
                      "through llama_context_params.pooling_type; the final hidden state after output_norm, "
                      "not normalised (the server's API normalises)"],
               prompts=res["prompts"])
    write_doc(a.stories_embeddings, doc, "prompts")
    print("ok stories260K embeddings (%d prompts)" % len(prompts))


def tables(man_path):
    """the README's per-family table from a manifest"""
    m = json.load(open(man_path))
    print("| file | architecture | bytes | params | smallest top-1/top-2 gap F32 (prompt 1 / 2 / 3) | Q8_0 | Q4_0 |"
          " logit RMS | Q8_0 / Q4_0 cosine vs F32 (worst prompt) |")
    print("|---|---|---:|---:|---|---|---|---:|---|")
    for name, e in m["families"].items():
        f = e["files"]["f32"]
        if "min_top12_gap" not in e:
            print("| `%s` | %s | %s | %s | (encoder: embeddings) | | | | |" % (name, e["arch"], format(f["size"], ","),
                                                                          format(e["n_params"], ",")))
            continue
        g = e["min_top12_gap"]
        cos = ["%.4f" % min(x["cosine"] for x in e["vs_f32"][v]) for v in ("q8_0", "q4_0")]
        print("| `%s` | %s | %s | %s | %s | %s | %s | %.2f | %s |" % (
            name, e["arch"], format(f["size"], ","), format(e["n_params"], ","),
            " / ".join("%.2g" % x for x in g["f32"]), " / ".join("%.2g" % x for x in g["q8_0"]),
            " / ".join("%.2g" % x for x in g["q4_0"]), sum(e["logit_rms"]) / 3, " / ".join(cos)))
    print()
    print("| file | exercises |")
    print("|---|---|")
    for name, e in m["families"].items():
        print("| `%s` | %s |" % (name, e["exercises"]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--tables":
        tables(sys.argv[2])
    else:
        main()
