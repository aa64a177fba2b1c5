"""Validates request bodies against the official SDKs' request types.

Reads JSON lines `{"api": "openai" | "openrouter" | "anthropic", "body": {...}}` on
stdin and checks each body against the streaming request TypedDict of the matching
SDK (`openai`, `anthropic` from PyPI) with pydantic, every TypedDict reachable from
it set to forbid unknown keys. Exits 0 when all bodies are valid; otherwise prints,
for each invalid line, the offending keys and pydantic's errors, and exits 1.

`openrouter` bodies are OpenAI bodies plus OpenRouter's documented extensions
(only `usage: {"include": bool}` is sent): the extension is checked on its own and
removed, then the rest must be a valid OpenAI body.

Used by the Rust integration tests (tests/it/providers_sdk.rs); set up with
scripts/setup-test-env.sh.
"""

import json
import sys
import typing

import pydantic
from pydantic import ConfigDict, TypeAdapter
from typing_extensions import is_typeddict

from anthropic.types.message_create_params import MessageCreateParamsStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

# arbitrary_types_allowed: some params accept file objects (`IO[bytes]`), which
# pydantic can only check with isinstance.
FORBID = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def forbid_extra_everywhere(tp, seen):
    """Marks every TypedDict reachable from `tp` as forbidding unknown keys.

    pydantic reads `__pydantic_config__` on each TypedDict class, and a config given
    to TypeAdapter would not reach nested TypedDicts, so the whole tree is walked.
    """
    if id(tp) in seen:
        return
    seen.add(id(tp))
    if is_typeddict(tp):
        tp.__pydantic_config__ = FORBID
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            forbid_extra_everywhere(hint, seen)
        return
    for arg in typing.get_args(tp):
        forbid_extra_everywhere(arg, seen)


class UnknownKeys(ValueError):
    """Keys that only a lenient response model accepted."""


def drain(value, path="body"):
    """Walks a validated body, for two things pydantic leaves unchecked.

    * The lazy iterators it returns for `Iterable[...]` fields: their items are
      validated only when iterated, so an error hides until then.
    * Response models: some params also accept the SDK's response classes (the
      Anthropic content blocks), pydantic models that allow unknown keys. A dict that
      no TypedDict took but such a model did had unknown keys; they are in its
      `model_extra`.
    """
    if isinstance(value, pydantic.BaseModel):
        if value.model_extra:
            keys = ", ".join(repr(k) for k in sorted(value.model_extra))
            raise UnknownKeys(f"offending key(s): {keys} (at {path})")
        for name in type(value).model_fields:
            drain(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, dict):
        for k, v in value.items():
            drain(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            drain(v, f"{path}.{i}")
    elif hasattr(value, "__next__"):
        for i, v in enumerate(value):
            drain(v, f"{path}.{i}")


OPENROUTER_USAGE = {"include"}


def openrouter_to_openai(body):
    """Checks and strips OpenRouter's extensions; returns the OpenAI part."""
    body = dict(body)
    usage = body.pop("usage", None)
    if usage is not None:
        if not isinstance(usage, dict):
            raise ValueError("usage: expected an object")
        unknown = set(usage) - OPENROUTER_USAGE
        if unknown:
            raise ValueError(f"usage: unknown key(s) {sorted(unknown)}")
        if not isinstance(usage.get("include"), bool):
            raise ValueError("usage.include: expected a boolean")
    return body


def build_adapters():
    seen = set()
    forbid_extra_everywhere(CompletionCreateParamsStreaming, seen)
    forbid_extra_everywhere(MessageCreateParamsStreaming, seen)
    return {
        "openai": TypeAdapter(CompletionCreateParamsStreaming),
        "anthropic": TypeAdapter(MessageCreateParamsStreaming),
    }


def describe(err):
    # Inside a union pydantic reports the unknown key once per member, so name each
    # key once, with one of the paths it was found at.
    extra = {}
    for e in err.errors():
        if e["type"] == "extra_forbidden":
            extra.setdefault(str(e["loc"][-1]), ".".join(str(p) for p in e["loc"]))
    lines = []
    if extra:
        named = ", ".join(f"{k!r} (at {path})" for k, path in sorted(extra.items()))
        lines.append("offending key(s): " + named)
    lines.append(str(err))
    return "\n".join(lines)


def main():
    adapters = build_adapters()
    failures = 0
    count = 0
    for lineno, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        count += 1
        try:
            item = json.loads(line)
            api, body = item["api"], item["body"]
            if api == "openrouter":
                api, body = "openai", openrouter_to_openai(body)
            adapter = adapters[api]
            drain(adapter.validate_python(body, strict=True))
        except pydantic.ValidationError as err:
            failures += 1
            print(f"line {lineno} ({item['api']}): invalid body\n{describe(err)}", file=sys.stderr)
        except UnknownKeys as err:
            failures += 1
            print(f"line {lineno} ({item['api']}): invalid body\n{err}", file=sys.stderr)
        except (ValueError, KeyError, TypeError) as err:
            failures += 1
            print(f"line {lineno}: {err!r}", file=sys.stderr)
    if failures:
        print(f"{failures} of {count} bodies invalid", file=sys.stderr)
        sys.exit(1)
    print(f"{count} bodies valid")


if __name__ == "__main__":
    main()
