#!/usr/bin/python3
"""Write tests/data/chat/expected.json: every ../shared/chat-templates/*.jinja
rendered for every conversation of conversations.json the way Hugging Face
transformers renders chat templates (transformers/utils/chat_template_utils.py,
_compile_jinja_template and render_jinja_template):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[jinja2.ext.loopcontrols])
  filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=None,
                                  separators=None, sort_keys=False)
  globals["raise_exception"] raises TemplateError(message)
  globals["strftime_now"]   = datetime.now().strftime(format), here with the
                              FIXED time of conversations.json (reproducible)
  render(messages=..., tools=..., documents=..., add_generation_prompt=...,
         **special_tokens, **extra)

Run with Debian's python3-jinja2 (apt-get install python3-jinja2):
  /usr/bin/python3 tests/data/chat/gen_expected.py [../shared/chat-templates]
The C test (tests/test_chat.c) reads the JSON files; it needs no Python.
"""
import datetime
import hashlib
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


def make_env(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateError(message)

    def strftime_now(format):
        return now.strftime(format)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context(spec, conv):
    ctx = {
        "messages": conv["messages"],
        "tools": conv.get("tools"),
        "documents": None,
        "add_generation_prompt": conv["add_generation_prompt"],
    }
    ctx.update(spec["special_tokens"])
    ctx.update(conv.get("extra", {}))
    return ctx


def render(env, source, ctx):
    try:
        return {"output": env.from_string(source).render(**ctx)}
    except TemplateError as e:
        kind = "raise_exception" if type(e) is TemplateError else type(e).__name__
        return {"error": kind, "message": str(e)}
    except Exception as e:  # TypeError, ValueError... raised inside the template
        return {"error": type(e).__name__, "message": str(e)}


def main():
    tdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../../shared/chat-templates")
    spec = json.load(open(os.path.join(HERE, "conversations.json"), encoding="utf-8"))
    now = datetime.datetime.fromisoformat(spec["fixed_time"])
    env = make_env(now)
    out = {
        "renderer": "python3-jinja2 %s, transformers settings (see gen_expected.py)" % jinja2.__version__,
        "templates": {},
    }
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".jinja"):
            continue
        raw = open(os.path.join(tdir, name), "rb").read()
        source = raw.decode("utf-8")
        cases = {}
        for conv in spec["conversations"]:
            cases[conv["name"]] = render(env, source, context(spec, conv))
        out["templates"][name] = {"sha256": hashlib.sha256(raw).hexdigest(), "cases": cases}
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
