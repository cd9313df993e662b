#!/usr/bin/python3
"""Render chat templates with python3-jinja2 exactly as transformers does (the
environment of gen_expected.py) for every conversation of the given
conversation files, and print one JSON object:
  {"jinja2": VERSION, "renders": {TEMPLATE_FILE_NAME: {CONVERSATION_NAME: {"output": TEXT} |
                                                       {"error": KIND, "message": TEXT}}}}
tests/test_chat_fam.c runs it at test time and compares cinfer's rendering.

  render_jinja2.py --conversations A.json [--conversations B.json] TEMPLATE.jinja ...
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jinja2  # noqa: E402
from jinja2 import nodes  # noqa: E402
from jinja2.ext import Extension  # noqa: E402
from gen_expected import context, make_env  # noqa: E402


class GenerationTag(Extension):
    """transformers' AssistantTracker: {% generation %}...{% endgeneration %}
    renders its body (the tracking of assistant spans is not needed here)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def render_compiled(template, ctx):
    """gen_expected.render on an already compiled template."""
    try:
        return {"output": template.render(**ctx)}
    except jinja2.TemplateError as e:
        kind = "raise_exception" if type(e) is jinja2.TemplateError else type(e).__name__
        return {"error": kind, "message": str(e)}
    except Exception as e:  # TypeError, ValueError... raised inside the template
        return {"error": type(e).__name__, "message": str(e)}


def main():
    args = sys.argv[1:]
    specs, templates = [], []
    while args:
        a = args.pop(0)
        if a == "--conversations":
            specs.append(json.load(open(args.pop(0), encoding="utf-8")))
        else:
            templates.append(a)
    now = datetime.datetime.fromisoformat(specs[0]["fixed_time"])
    env = make_env(now)
    env.add_extension(GenerationTag)
    out = {"jinja2": jinja2.__version__, "renders": {}}
    for path in templates:
        source = open(path, "rb").read().decode("utf-8")
        cases = {}
        try:  # compiled once (gen_expected.render compiles per call)
            compiled = env.from_string(source)
        except jinja2.TemplateError as e:
            compiled = None
            failure = {"error": type(e).__name__, "message": str(e)}
        for spec in specs:
            for conv in spec["conversations"]:
                cases[conv["name"]] = render_compiled(compiled, context(spec, conv)) if compiled else failure
        out["renders"][os.path.basename(path)] = cases
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
