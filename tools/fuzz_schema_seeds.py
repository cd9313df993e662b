#!/usr/bin/env python3
"""fuzz_schema_seeds.py SHARED OUT — seed inputs for fuzz/fuzz_schema.c:
each JSONSchemaBench schema of at most 4 KiB with its first valid instance
(SCHEMA, NUL, flags byte, instance), and each JSON-Schema-Test-Suite schema
alone.  (The large schemas take seconds a run under the sanitizers: the
fuzzer would spend its time there instead of mutating.)"""
import json
import os
import sys


def main(shared, out):
    n = 0
    data = os.path.join(shared, "jsonschemabench", "data")
    for name in sorted(os.listdir(data)) if os.path.isdir(data) else []:
        with open(os.path.join(data, name), encoding="utf-8") as f:
            doc = json.load(f)
        inst = next((t["data"] for t in doc.get("tests", []) if t.get("valid")), None)
        seed = json.dumps(doc["schema"], separators=(",", ":")).encode()
        if len(seed) > 4096:
            continue
        if inst is not None:
            seed += b"\0" + bytes([n % 8]) + json.dumps(inst, separators=(",", ":"), ensure_ascii=False).encode()
        with open(os.path.join(out, f"jsb-{n:04d}"), "wb") as f:
            f.write(seed)
        n += 1
    suite = os.path.join(shared, "json-schema-test-suite", "tests", "draft2020-12")
    for name in sorted(os.listdir(suite)) if os.path.isdir(suite) else []:
        if not name.endswith(".json"):
            continue
        with open(os.path.join(suite, name), encoding="utf-8") as f:
            groups = json.load(f)
        for g in groups:
            with open(os.path.join(out, f"suite-{n:04d}"), "wb") as f:
                f.write(json.dumps(g["schema"], separators=(",", ":")).encode())
            n += 1
    print(f"  SEEDS   {n} in {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
