"""Renders chat-template cases the way Hugging Face transformers' apply_chat_template does.

Reads {"template": str, "cases": [{"name", "messages", "options"}]} as JSON on stdin and writes
{"renderer": ..., "goldens": {name: text}} on stdout. The Jinja environment is transformers'
(_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
the loopcontrols extension, `tojson` as json.dumps(ensure_ascii=False) and `raise_exception`.
Needs only python3 and jinja2 (Debian's python3-jinja2).
"""
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    request = json.load(sys.stdin)
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    template = environment.from_string(request["template"])
    goldens = {}
    for case in request["cases"]:
        options = case["options"]
        context = {"messages": case["messages"], "add_generation_prompt": options.get("addGenerationPrompt", True)}
        if options.get("tools"):
            context["tools"] = options["tools"]
        if "enableThinking" in options:
            context["enable_thinking"] = options["enableThinking"]
        goldens[case["name"]] = template.render(**context)
    json.dump({"renderer": f"python jinja2 {jinja2.__version__}, transformers' environment", "goldens": goldens}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main()
