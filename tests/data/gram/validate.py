#!/usr/bin/python3
"""validate.py SCHEMA INSTANCE... — the independent check of cinfer's
structured output: each INSTANCE (a JSON file) is validated against SCHEMA
with python3-jsonschema (Debian's package; the validator class follows the
schema's $schema, default 2020-12), strict JSON (no duplicate keys, no NaN or
Infinity), formats asserted: jsonschema's FormatChecker plus the formats
validate_batch.py checks itself (date-time, time, duration, hostname,
uri-template), which Debian's jsonschema leaves unchecked without optional
packages.  Prints one line per invalid instance; exit 0 when all are valid,
1 when one is not, 2 on usage or schema errors."""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("validate.py: python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_batch import checker_for, no_constants, no_duplicates  # noqa: E402


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=checker_for(cls))
    bad = 0
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            instance = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants)
        except ValueError as e:
            print(f"{path}: not JSON: {e}")
            bad += 1
            continue
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
        if errors:
            bad += 1
            print(f"{path}: {errors[0].message} at {'/'.join(map(str, errors[0].path))}: {text[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
