#!/usr/bin/python3
"""validate_batch.py [--exact-numbers] BATCH — the independent check of
cinfer's structured output, for many schemas and instances in one process.

BATCH is a text file of lines:
  S <id> <schema as one line of JSON>
  I <id> <tag> <instance bytes in hex>
Each instance is checked against the schema with that id (given earlier):
its bytes must be UTF-8 and strict JSON (no duplicate keys, no NaN or
Infinity), and valid under python3-jsonschema (Debian's package; the
validator class follows the schema's $schema, default 2020-12), formats
asserted: jsonschema's FormatChecker, plus RFC 3339 date-time/time, ISO 8601
duration, RFC 1123 hostname and RFC 6570 uri-template checked here, which
Debian's jsonschema leaves unchecked without optional packages.

--exact-numbers parses numbers with a fraction as decimal.Decimal, in the
schema and in the instances, so bounds and multipleOf are exact (cinfer's
grammar is exact; Python floats are not: 0.3 is no multiple of 0.1 in
binary).  Without it numbers are floats, as most validators have them.

Output: one line per failing instance, "BAD <id> <tag> <reason>"; one per
instance the validator could not evaluate (it raised, e.g. a $ref it cannot
resolve that cinfer resolved), "UNVERIFIED <id> <tag> <reason>"; one per
schema the validator cannot use at all, "SKIP <id> <reason>"; then
"DONE <instances> <bad> <skipped schemas> <unverified>".  Exit 0 when no
instance failed, 1 when one did, 2 on usage errors."""
import datetime
import decimal
import json
import re
import sys

try:
    import jsonschema
except ImportError:
    print("validate_batch.py: python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(2)


class DuplicateKey(ValueError):
    pass


def no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(f"duplicate key {k!r}")
        out[k] = v
    return out


def no_constants(name):
    raise ValueError(f"{name} is not JSON")


RE_DATE_TIME = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|([+-])(\d\d):(\d\d))$")
RE_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|([+-])(\d\d):(\d\d))$")
RE_DURATION = re.compile(
    r"^P(?:(?:\d+Y(?:\d+M(?:\d+D)?)?|\d+M(?:\d+D)?|\d+D)(?:T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S))?"
    r"|T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)|\d+W)$")
RE_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
RE_URI_TEMPLATE = re.compile(
    r"^(?:[^\x00-\x20\"'<>\\^`{|}]|%[0-9A-Fa-f]{2}"
    r"|\{[+#./;?&=,!@|]?[A-Za-z0-9_%][A-Za-z0-9_%.]*(?::[1-9]\d{0,3}|\*)?"
    r"(?:,[A-Za-z0-9_%][A-Za-z0-9_%.]*(?::[1-9]\d{0,3}|\*)?)*\})*$")


def _time_ok(h, mi, s, oh, om):
    return int(h) <= 23 and int(mi) <= 59 and int(s) <= 60 and (oh is None or (int(oh) <= 23 and int(om) <= 59))


def is_date_time(x):
    if not isinstance(x, str):
        return True
    m = RE_DATE_TIME.match(x)
    if not m:
        return False
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return _time_ok(m.group(4), m.group(5), m.group(6), m.group(10), m.group(11))


def is_time(x):
    if not isinstance(x, str):
        return True
    m = RE_TIME.match(x)
    return bool(m) and _time_ok(m.group(1), m.group(2), m.group(3), m.group(7), m.group(8))


def is_duration(x):
    return not isinstance(x, str) or bool(RE_DURATION.match(x))


def is_hostname(x):
    if not isinstance(x, str):
        return True
    if not x or len(x) > 253:
        return False
    return all(RE_LABEL.match(label) for label in x.split("."))


def is_uri_template(x):
    return not isinstance(x, str) or bool(RE_URI_TEMPLATE.match(x))


EXTRA_FORMATS = {"date-time": is_date_time, "time": is_time, "duration": is_duration, "hostname": is_hostname,
                 "uri-template": is_uri_template}


def checker_for(cls):
    fc = cls.FORMAT_CHECKER
    checker = jsonschema.FormatChecker(list(fc.checkers))
    checker.checkers = dict(fc.checkers)
    for name, fn in EXTRA_FORMATS.items():
        if name not in checker.checkers:
            checker.checkers[name] = (fn, ())
    return checker


def main(argv):
    exact = "--exact-numbers" in argv
    args = [a for a in argv[1:] if a != "--exact-numbers"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    parse_float = decimal.Decimal if exact else float
    schemas, validators, skipped = {}, {}, set()
    n = bad = unverified = 0
    with open(args[0], encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("S "):
                _, sid, text = line.split(" ", 2)
                schemas[sid] = text
                continue
            if not line.startswith("I "):
                continue
            _, sid, tag, hexed = line.split(" ", 3)
            if sid not in validators and sid not in skipped:
                # made on first use: most schemas have no accepted mutant to check
                try:
                    schema = json.loads(schemas[sid], parse_float=parse_float)
                    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                    cls.check_schema(schema)
                    validators[sid] = cls(schema, format_checker=checker_for(cls))
                except Exception as e:  # the validator cannot use this schema: say so, never count it
                    skipped.add(sid)
                    print(f"SKIP {sid} {type(e).__name__}: {str(e)[:200]!r}")
            if sid in skipped:
                continue
            n += 1
            try:
                text = bytes.fromhex(hexed).decode("utf-8")
                inst = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constants,
                                  parse_float=parse_float)
            except Exception as e:  # not UTF-8, not JSON, a duplicate key
                bad += 1
                print(f"BAD {sid} {tag} {type(e).__name__}: {str(e)[:200]!r}")
                continue
            try:
                errs = list(validators[sid].iter_errors(inst))
            except Exception as e:  # the validator itself failed: no verdict
                unverified += 1
                print(f"UNVERIFIED {sid} {tag} {type(e).__name__}: {str(e)[:200]!r}")
                continue
            if errs:
                bad += 1
                e = errs[0]
                print(f"BAD {sid} {tag} {e.message[:200]!r} at /{'/'.join(map(str, e.path))}")
    print(f"DONE {n} {bad} {len(skipped)} {unverified}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
