#!/usr/bin/env python3
"""check_layout.py — keep cinfer's layers layered (make check-layout).

The source tree is a stack of folders (docs/architecture.md, "Layers"): a
folder may use its own files and the folders below it, never one above it and
never a sibling on its own level.  Two views are checked:

  includes  every `#include "..."` in the project's C sources and headers,
            resolved like the compiler does (the including file's folder, then
            -Iinclude -Itemplates -Iruntime -I.);
  symbols   with --objects BUILD: every undefined symbol of every object file
            under BUILD/{runtime,compiler,cli} that another of those objects
            defines (nm), i.e. who calls whom.  Cross-folder references must
            go down the stack, and inside a folder the module graph must have
            no cycle (a module is one .c file; a cycle means two modules that
            can only be understood together).

Exit status 0 when both are clean, 1 with one line per violation otherwise:
  runtime/kernels/kern.c:12: includes runtime/engine/engine.h (engine, layer 7) from kernels (layer 2): upward
  symbols: runtime/grammar/gram_schema.o -> gram_mask.o (gram_cache_free) closes the cycle gram_mask -> gram_match -> gram_schema -> gram_mask
"""
import os
import re
import subprocess
import sys

# Layer of each folder, bottom (0) to top.  Folders on one level must not use
# each other.  Anything not listed here (tests/, tools/, fuzz/, examples/) sits
# above everything and is not checked.
LAYERS = [
    ("templates", 0),        # prelude.h: the ABI of generated code
    ("include", 0),          # cinfer.h: the public contract (declarations only)
    ("runtime/base", 1),     # f16, thread pool, GGML type table, precisions, embedded files
    ("runtime/kernels", 2),  # compute kernels (scalar reference + per-ISA), block quantizers
    ("runtime/kernels/cuda", 2),  # CUDA kernel sources (NVRTC at load) and their launch geometry
    ("runtime/gpu", 2),      # the CUDA driver API and NVRTC, loaded at run time (dlopen)
    ("runtime/formats", 3),  # GGUF read/write, safetensors, model-file detection, quantize
    ("runtime/text", 4),     # Unicode, tokenizers, Jinja, chat templates
    ("runtime/grammar", 5),  # JSON Schema -> grammar, matcher, token masks, confidence
    ("compiler", 6),         # archspec (Lua) -> IR -> C -> JIT/AOT
    ("runtime/engine", 6),   # bound weights, KV cache, eval, sampler, .giw
    ("runtime/api", 7),      # the library (include/cinfer.h)
    ("runtime/server", 8),   # HTTP server, web UI
    ("runtime/hub", 8),      # Hugging Face pulls
    ("cli", 9),              # the cinfer command
]
RANK = dict(LAYERS)
INCLUDE_DIRS = ["include", "templates", "runtime", "."]
INC_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """The LAYERS folder holding repo-relative path, or None."""
    best = None
    for f, _ in LAYERS:
        if path == f or path.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def sources(root):
    for top in ("runtime", "compiler", "cli", "templates", "include"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for n in sorted(files):
                if n.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, n), root)


def resolve(root, src, inc):
    cands = [os.path.join(os.path.dirname(src), inc)] + [os.path.join(d, inc) for d in INCLUDE_DIRS]
    for c in cands:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def edge_problem(src_folder, dst_folder):
    if src_folder == dst_folder or dst_folder is None or src_folder is None:
        return None
    rs, rd = RANK[src_folder], RANK[dst_folder]
    if rd > rs:
        return "upward"
    if rd == rs:
        return "sideways (same layer)"
    return None


def check_includes(root):
    bad = []
    for src in sources(root):
        text = open(os.path.join(root, src), encoding="utf-8", errors="replace").read()
        for m in INC_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            dst = resolve(root, src, m.group(1))
            if dst is None:
                continue  # a generated or system header; the compiler reports real misses
            sf, df = folder_of(src), folder_of(dst)
            why = edge_problem(sf, df)
            if why:
                bad.append("%s:%d: includes %s (%s, layer %d) from %s (layer %d): %s"
                           % (src, line, dst, df, RANK[df], sf, RANK[sf], why))
    return bad


def nm(paths, undefined):
    """{object: set of symbols} it defines (or, undefined=True, needs): one nm run for all."""
    args = ["nm", "-A", "-u" if undefined else "--defined-only"] + paths
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = {p: set() for p in paths}
    for ln in out.splitlines():
        path, _, rest = ln.partition(":")
        parts = rest.split()
        if path not in syms or not parts:
            continue
        if undefined:
            syms[path].add(parts[-1])
        elif len(parts) == 3 and parts[1] in "TDBRVW":
            syms[path].add(parts[2])
    return syms


def find_cycle(nodes, edges):
    """One cycle in the directed graph as a node list, or None."""
    color = {n: 0 for n in nodes}
    stack = []

    def dfs(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if color[m] == 1:
                return stack[stack.index(m):] + [m]
            if color[m] == 0:
                c = dfs(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(nodes):
        if color[n] == 0:
            c = dfs(n)
            if c:
                return c
    return None


def check_symbols(root, build):
    objs = []
    for top in ("runtime", "compiler", "cli"):
        for d, _, files in os.walk(os.path.join(build, top)):
            objs += [os.path.join(d, n) for n in sorted(files) if n.endswith(".o")]
    # only objects of sources that still exist (a stale build tree keeps old ones)
    objs = [o for o in objs if os.path.isfile(os.path.join(root, os.path.relpath(o, build)[:-2] + ".c"))]
    if not objs:
        return ["symbols: no object files under %s (build first)" % build]
    owner = {}  # symbol -> object
    for o, syms in nm(objs, False).items():
        for s in syms:
            owner[s] = o
    needs = nm(objs, True)
    src = {o: os.path.relpath(o, build)[:-2] + ".c" for o in objs}
    bad = []
    local = {}  # folder -> {module: {module}}
    for o in objs:
        sf = folder_of(src[o])
        for s in sorted(needs[o]):
            d = owner.get(s)
            if d is None or d == o:
                continue
            df = folder_of(src[d])
            why = edge_problem(sf, df)
            if why:
                bad.append("symbols: %s calls %s (%s) in %s: %s" % (src[o], s, src[d], df, why))
            elif sf == df:
                local.setdefault(sf, {}).setdefault(o, {})[d] = s
    for f, edges in sorted(local.items()):
        nodes = set(edges) | {d for e in edges.values() for d in e}
        cyc = find_cycle(nodes, edges)
        if cyc:
            hops = ["%s -(%s)-> %s" % (os.path.basename(src[a]), edges[a][b], os.path.basename(src[b]))
                    for a, b in zip(cyc, cyc[1:])]
            bad.append("symbols: cycle in %s: %s" % (f, ", ".join(hops)))
    return bad


def main(argv):
    root = "."
    build = None
    i = 1
    while i < len(argv):
        if argv[i] == "--objects" and i + 1 < len(argv):
            build = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            root = argv[i]
            i += 1
    bad = check_includes(root)
    if build:
        bad += check_symbols(root, build)
    for b in bad:
        print("check-layout: " + b)
    if bad:
        print("check-layout: %d violation(s); the layers are in tools/check_layout.py and docs/architecture.md" % len(bad))
        return 1
    print("check-layout: ok (%d folders, includes%s)" % (len(LAYERS), " and symbols" if build else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
