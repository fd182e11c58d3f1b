"""infra/registry.tf, written from the registries (``python -m shared.tools.docs`` rewrites it).

From :mod:`shared.runtime.stages`: the topics (one per message class), the consumers (one
push subscription each, named ``<stage>.<topic>``, delivered to the function named after the
stage, or ``<stage>-<topic>`` for a stage that consumes several), every Cloud Function (its
stage, entry point, trigger, what it publishes, its access and sizing) and the query stages. From
:mod:`shared.contract.providers`: ``var.llm_provider`` and the values it accepts, and per
provider the variables, secrets and project roles of the functions that call the model, what
the plan refuses (``provider_checks``: its required variables, a key sent over plain http, a call
budget the model functions cannot hold; functions.tf's preconditions read it), plus the
Terraform variables a provider declares for itself. A unit test fails when the file is stale.
:func:`render_tfvars` writes terraform.tfvars.example's models section from the same rows.
"""

from __future__ import annotations

import json

from shared.contract import topics
from shared.contract.providers import PROVIDERS, Provider
from shared.runtime.stages import CONSUMERS, QUERY_STAGES, STAGES, Function, Stage, consumers_of

HEADER = """\
# Generated from shared/runtime/stages.py and shared/contract/providers.py by
# `python -m shared.tools.docs`: edit those, then run it (tests/unit/test_settings_table.py
# fails while this file is stale). Hand-written infra/ reads these locals.
"""


def consumer_function(stage: str, topic: str) -> str:
    """The function a consumer's subscription pushes to: one per stage, or per topic when the
    stage consumes several (a gen2 function has one trigger)."""
    name = stage.replace("_", "-")
    return f"{name}-{topic}" if len(consumers_of(stage)) > 1 else name


def function_name(stage: Stage, function: Function) -> str:
    """A function's key in local.functions (deployed as ragbus-<key>)."""
    if function.topic:
        return consumer_function(stage.name, function.topic)
    return (function.target or stage.name).replace("_", "-")


def _function_block(stage: Stage, function: Function) -> list[str]:
    target = function.target or stage.targets[0]
    trigger = function.event or stage.trigger
    publishes = stage.publishes if function.publishes is None else function.publishes
    flag = {True: "true", False: "false"}
    lines = [f"    {_string(function_name(stage, function))} = {{"]
    if function.note:
        lines.append(f"      # {function.note}")
    lines += [
        f"      stage     = {_string(stage.name)}, entry_point = {_string(target)}, trigger = {_string(trigger)}",
        f"      publishes = {_list(publishes)}, blobs = {_string(function.blobs)}, "
        f"documents = {_string(function.documents)}, model = {flag[function.model]}, "
        f"embeds = {flag[function.embeds]}, index = {flag[function.index]}",
        f"      memory    = {_string(function.memory)}, cpu = {_string(function.cpu)}, timeout = {function.timeout}, "
        f"max_instances = {function.max_instances}, concurrency = {function.concurrency}",
        "    }"]
    return lines


def _string(value: str) -> str:
    return json.dumps(value)  # an HCL string literal is JSON's for these characters


def _list(values) -> str:
    return "[" + ", ".join(_string(v) for v in values) + "]"


def _attributes(pairs, indent: str) -> list[str]:
    """``name = value`` lines aligned as terraform fmt aligns them: consecutive one-line
    attributes share a column; a multi-line one stands alone."""
    lines: list[str] = []
    group: list[tuple[str, str]] = []

    def flush() -> None:
        width = max((len(k) for k, _ in group), default=0)
        lines.extend(f"{indent}{k.ljust(width)} = {v}" for k, v in group)
        group.clear()

    for key, value in pairs:
        if "\n" in value:
            flush()
            lines.append(f"{indent}{key} = {value}")
        else:
            group.append((key, value))
    flush()
    return lines


def _map(pairs, indent: str) -> str:
    if not pairs:
        return "{}"
    return "{\n" + "\n".join(_attributes(pairs, indent + "  ")) + "\n" + indent + "}"


#: The provider a deploy uses unless llm_provider says otherwise.
DEFAULT_PROVIDER = "gemini"


def _terraform_name(expression: str) -> str:
    return expression.removeprefix("var.")


def provider_checks(provider: Provider) -> list[tuple[str, str]]:
    """What the plan refuses for ``provider``, as Terraform attributes (see the module docstring)."""
    required = [r for r in provider.required if r.terraform]
    ready = " && ".join(f'{r.terraform} != ""' for r in required) or "true"
    names = " and ".join(_terraform_name(r.terraform) for r in required)
    needs = f'llm_provider = "{provider.name}" needs {names}.' if required else ""
    base_url = next((r.terraform for r in required if r.setting == provider.base_url_setting), None)
    secret = next((expression for _, expression in provider.deploy_secrets), None)
    clear_key = f'{secret} != "" && !startswith({base_url}, "https://")' if base_url and secret else "false"
    budget = provider.call_budget
    return [("ready", ready), ("needs", _string(needs)), ("clear_key", clear_key),
            ("budget_s", budget.terraform_seconds() if budget else "0"),
            ("budget", _string(f"{budget.timeouts} x {_terraform_name(budget.terraform)} + {budget.waits_s:g} s"
                               if budget else ""))]


def render_tfvars() -> str:
    """terraform.tfvars.example's models section: the default provider's variables set, every
    other provider's commented out."""
    names = ", ".join(_string(p.name) for p in PROVIDERS)
    lines = [f"# The model of the query loop: one of {names} (shared/contract/providers.py)."]
    for p in sorted(PROVIDERS, key=lambda p: p.name != DEFAULT_PROVIDER):
        rows = list(p.tfvars)
        prefix = ""
        if p.name == DEFAULT_PROVIDER:
            rows.insert(0, ("llm_provider", _string(p.name), ""))
        elif rows:
            prefix = "# "
            lines.append(f'# llm_provider = "{p.name}": {p.deploy_summary}:')
        width = max((len(name) for name, _, _ in rows), default=0)
        lines += [f"{prefix}{name.ljust(width)} = {value}" + (f" # {comment}" if comment else "")
                  for name, value, comment in rows]
    return "\n".join(lines) + "\n"


def render() -> str:
    names = [p.name for p in PROVIDERS]
    quoted = ", ".join(f"'{n}'" for n in names[:-1]) + f" or '{names[-1]}'"
    lines = [HEADER, "locals {",
             "  # One per message class (shared/contract/messages.py) and stage hop, each paired with a dead-letter topic (pubsub.tf).",
             "  topics = [", *[f"    {_string(t)}," for t in topics.ALL_TOPICS], "  ]", "",
             "  # One push subscription per (stage, consumed topic), keyed by the subscription name the code uses.",
             "  consumers = {"]
    width = max(len(_string(c.subscription)) for c in CONSUMERS)
    for c in CONSUMERS:
        lines.append(f"    {_string(c.subscription).ljust(width)} = {{ stage = {_string(c.stage)}, "
                     f"topic = {_string(c.topic)}, function = {_string(consumer_function(c.stage, c.topic))} }}")
    lines += ["  }", "", "  # Every Cloud Function, keyed by its short name (deployed as \"ragbus-<key>\"); the fields are",
              "  # explained in stages.tf.", "  functions = {"]
    for stage in STAGES:
        for function in stage.functions:
            lines += _function_block(stage, function)
    lines += ["  }", "", "  # The query loop's stages: their subscriptions retry quickly (stages.tf: consumer_backoff).",
              f"  query_stages = {_list(QUERY_STAGES)}", "",
              "  # What the functions that call the model get, per provider: plain variables, secrets",
              "  # (variable -> Secret Manager id, given only when set) and project roles.",
              "  provider_env = {"]
    lines += _attributes([(p.name, _map(p.deploy_variables, "    ")) for p in PROVIDERS], "    ")
    lines += ["  }", "  provider_secrets = {"]
    lines += _attributes([(p.name, _map(p.deploy_secrets, "    ")) for p in PROVIDERS], "    ")
    lines += ["  }", "  provider_roles = {"]
    lines += _attributes([(p.name, _list(p.deploy_roles)) for p in PROVIDERS], "    ")
    lines += ["  }", "",
              "  # What the plan refuses per provider (functions.tf's preconditions): a required variable",
              "  # left empty (ready, needs), its key's secret sent to a plain-http API base (clear_key), one",
              "  # invocation's model use (budget_s, budget: its call budget) outlasting a model function.",
              "  provider_checks = {"]
    lines += _attributes([(p.name, _map(provider_checks(p), "    ")) for p in PROVIDERS], "    ")
    lines += ["  }", "}", "",
              'variable "llm_provider" {',
              f"  description = {_string('Language model of the query loop (RAGBUS_LLM), from the provider registry (shared/contract/providers.py): ' + '; '.join(f'{p.name!r}: {p.deploy_summary}' for p in PROVIDERS))}",
              "  type        = string",
              f"  default     = {_string(DEFAULT_PROVIDER)}",
              "",
              "  validation {",
              f"    condition     = contains({_list(names)}, var.llm_provider)",
              f"    error_message = {_string(f'llm_provider must be {quoted}.')}",
              "  }",
              "}"]
    for p in PROVIDERS:
        for variable in p.terraform_variables:
            lines += ["", f'variable "{variable.name}" {{',
                      f"  description = {_string(variable.description)}",
                      f"  type        = {variable.type}",
                      f"  default     = {variable.default}",
                      "}"]
    return "\n".join(lines) + "\n"
