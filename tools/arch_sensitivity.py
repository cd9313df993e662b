#!/usr/bin/env python3
"""Does each test model's distinctive feature move llama.cpp's logits?

usage: arch_sensitivity.py --ref-json BIN --backend-dir DIR --models DIR

For a list of (family, GGUF key, new value) it copies build/arch-models/<family>.gguf,
rewrites that one scalar key in place (same type, same size), runs ref-json
(../shared/tools/refgen) on both files with the three reference prompts and
prints, per prompt, the RMS of the change of logits_last over the RMS of the
logits and how many greedy steps stay identical.  A feature the model does
not exercise shows 0 and 32.  tests/data/arch/README.md has the results.
Standard library only.
"""
import argparse, json, math, os, shutil, struct, subprocess, tempfile

PROMPTS = [
    "Once upon a time",
    "The little dog",
    "Once upon a time, there was a little girl named Lily. She lived in a small house near "
    "the woods with her mom and her dog, Max. Every day, they went for a walk.",
]

# family, key (without the "<arch>." prefix), new value, what turning it off/changing it means
CASES = [
    ("gemma2", "attn_logit_softcapping", 1e6, "attention soft-cap off"),
    ("gemma2", "final_logit_softcapping", 1e6, "final soft-cap off"),
    ("gemma2", "attention.sliding_window", 100000, "sliding window off"),
    ("gemma3", "rope.freq_base_swa", 1000000.0, "local RoPE base = global"),
    ("granite", "attention.scale", 0.1767767, "attention.scale = 1/sqrt(head_dim)"),
    ("granite", "residual_scale", 1.0, "residual_scale 1"),
    ("gpt-oss", "rope.scaling.factor", 1.0, "YaRN factor 1"),
    ("gpt-oss", "attention.sliding_window", 100000, "sliding window off"),
    ("deepseek2", "expert_weights_scale", 1.0, "routed scale 1"),
    ("deepseek2", "expert_group_used_count", 3, "3 of 4 expert groups"),
    ("deepseek2", "rope.scaling.yarn_log_multiplier", 0.0, "no YaRN mscale"),
    ("glm4moe", "expert_weights_scale", 1.0, "routed scale 1"),
    ("qwen2moe", "expert_used_count", 2, "top-2 instead of top-4"),
    ("mistral3", "attention.temperature_scale", 0.0, "no attention temperature"),
    ("mistral3", "rope.scaling.factor", 1.0, "YaRN factor 1"),
    ("mellum", "attention.sliding_window", 100000, "sliding window off"),
    ("cohere2", "attention.sliding_window", 100000, "sliding window off"),
    ("command-r", "logit_scale", 1.0, "logit_scale 1"),
    ("gemma4", "final_logit_softcapping", 1e6, "final soft-cap off"),
    ("gemma4", "attention.sliding_window", 100000, "sliding window off"),
    ("gptneox", "use_parallel_residual", False, "sequential residual"),
    ("qwen3next", "rope.dimension_count", 64, "full rotary instead of 16/64"),
    ("granitehybrid", "embedding_scale", 1.0, "embedding_scale 1"),
]


def find_key(data, key):
    """offset and GGUF type of the value of a scalar key"""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    off = 24
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    for _ in range(n_kv):
        klen = struct.unpack_from("<Q", data, off)[0]
        k = data[off + 8:off + 8 + klen].decode()
        off += 8 + klen
        t = struct.unpack_from("<I", data, off)[0]
        off += 4
        if k == key:
            if t not in sizes and t != 8:
                raise ValueError("%s is an array" % key)
            return off, t
        if t == 8:
            off += 8 + struct.unpack_from("<Q", data, off)[0]
        elif t == 9:
            et, n = struct.unpack_from("<IQ", data, off)
            off += 12
            if et == 8:
                for _ in range(n):
                    off += 8 + struct.unpack_from("<Q", data, off)[0]
            else:
                off += n * sizes[et]
        else:
            off += sizes[t]
    raise KeyError(key)


def patched(src, key, value):
    data = bytearray(open(src, "rb").read())
    off, t = find_key(data, "general.architecture")
    n = struct.unpack_from("<Q", data, off)[0]
    arch = data[off + 8:off + 8 + n].decode()
    off, t = find_key(data, "%s.%s" % (arch, key))
    fmt = {4: "<I", 5: "<i", 6: "<f", 7: "<?"}[t]
    struct.pack_into(fmt, data, off, value)
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.write(fd, bytes(data))
    os.close(fd)
    return path


def run(a, model):
    cmd = [a.ref_json, "-m", model, "-t", "1", "-n", "32", "--backend-dir", a.backend_dir]
    for p in PROMPTS:
        cmd += ["-p", p]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref-json", required=True)
    ap.add_argument("--backend-dir", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    print("| model | change | RMS of logit change / RMS (prompt 1 / 2 / 3) | greedy steps still identical |")
    print("|---|---|---|---|")
    base = {}
    for fam, key, value, what in CASES:
        src = os.path.join(a.models, fam + ".gguf")
        if fam not in base:
            base[fam] = run(a, src)
        tmp = patched(src, key, value)
        try:
            alt = run(a, tmp)
        finally:
            os.remove(tmp)
        d, same = [], []
        for p, q in zip(base[fam], alt):
            x, y = p["logits_last"], q["logits_last"]
            rms = math.sqrt(sum(v * v for v in x) / len(x))
            d.append(math.sqrt(sum((u - v) ** 2 for u, v in zip(x, y)) / len(x)) / rms)
            same.append(next((i for i, (u, v) in enumerate(zip(p["greedy_ids"], q["greedy_ids"])) if u != v), 32))
        print("| %s | %s (`%s` = %s) | %s | %s |" % (fam, what, key, value, " / ".join("%.2g" % v for v in d),
                                                  " / ".join(str(v) for v in same)))


if __name__ == "__main__":
    main()
