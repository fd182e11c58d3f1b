"""infra/ applies on a current project: pinned provider, a build identity, an adoptable
Firestore database, Vector Search mode, and every variable the gcp runtime needs at start-up.

Read offline with python-hcl2 (terraform itself cannot be downloaded here), with the
helpers of tests/unit/test_infra.py.
"""

from __future__ import annotations

import re

import hcl2
import pytest

from shared.contract.config import SETTING_BY_FIELD, load_settings, require_gcp
from shared.contract.errors import ConfigError
from shared.contract.providers import PROVIDER_BY_NAME, PROVIDER_NAMES
from tests.unit.test_infra import (
    INFRA,
    _block,
    _clean,
    _default,
    _functions,
    _local,
    _resource,
    _tf,
)

pytestmark = pytest.mark.unit


def _parsed(name: str) -> dict:
    with (INFRA / name).open() as handle:
        return _clean(hcl2.load(handle))


def test_the_google_provider_is_pinned_to_one_major():
    terraform = _parsed("versions.tf")["terraform"][0]
    providers = terraform["required_providers"][0]
    assert providers["google"]["version"] == "~> 7.0"
    assert "google-beta" not in providers  # nothing uses it; if added, pin it the same way
    assert not any("google-beta" in str(body) for body in _tf()["resource"].values())
    # import blocks with for_each (firestore.tf) need Terraform 1.7
    assert terraform["required_version"] == ">= 1.7"
    # what the 7.0 upgrade guide changed for the resources used here
    function = _resource("google_cloudfunctions2_function", "function")
    assert "service" not in _block(function, "service_config")  # an attribute since 7.0
    trigger = function["dynamic"][0]["event_trigger"]["content"][0]
    assert trigger["event_type"]  # required since 7.0
    assert "metadata" in _resource("google_vertex_ai_index", "chunks")  # required since 7.0


def test_functions_build_as_their_own_build_account():
    account = _resource("google_service_account", "build")
    assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", account["account_id"])
    for name, function in _functions().items():
        build = _block(function, "build_config")
        assert build["service_account"] == "${google_service_account.build.id}", name
    binding = _resource("google_project_iam_member", "build")
    assert binding["member"] == "${google_service_account.build.member}"
    assert binding["for_each"] == "${toset(local.build_project_roles)}"
    assert "roles/artifactregistry.writer" in _local("build_project_roles")
    depends = _resource("google_cloudfunctions2_function", "function")["depends_on"]
    assert "${google_project_iam_member.build}" in depends


def test_an_existing_firestore_database_can_be_adopted():
    (block,) = _parsed("firestore.tf")["import"]
    assert block["to"] == "${google_firestore_database.main}"
    assert "var.adopt_firestore_database" in block["for_each"]
    assert block["id"] == "projects/${var.project}/databases/${each.value}"
    assert _default("adopt_firestore_database") is False
    assert _resource("google_firestore_database", "main")["name"] == "${var.firestore_database}"


def test_vector_search_mode_deploys_an_index_endpoint_and_deployed_index():
    assert _default("index_backend") == ""  # chosen by cost (test_capacity.py)
    index = _resource("google_vertex_ai_index", "chunks")
    assert index["count"] == "${local.vertex_index ? 1 : 0}"
    assert index["index_update_method"] == "STREAM_UPDATE"  # the adapter streams upserts/removals
    config = index["metadata"][0]["config"][0]
    assert config["dimensions"] == "${var.embedding_dimension}"
    endpoint = _resource("google_vertex_ai_index_endpoint", "chunks")
    assert endpoint["public_endpoint_enabled"] is True
    deployed = _resource("google_vertex_ai_index_endpoint_deployed_index", "chunks")
    assert deployed["index"] == "${google_vertex_ai_index.chunks[0].id}"
    assert deployed["index_endpoint"] == "${google_vertex_ai_index_endpoint.chunks[0].id}"
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", _local("vertex_deployed_index_id"))
    assert _local("vertex_index") == '${local.index_backend == "vertex"}'
    # the functions that touch the index may call Vector Search in that mode
    functions = _local("functions")
    assert {n for n, f in functions.items() if f["index"]} == {
        "indexer-document-cleaned", "indexer-document-deleted", "retriever", "gateway"}
    assert "local.vertex_index" in str(_local("function_project_bindings"))


# --------------------------------------------- what the code reads at start-up


def _common_env() -> str:
    return str(_local("common_env"))


def _names_set_by_infra(vertex: bool) -> dict[str, str]:
    """Every variable functions.tf sets for a function, with a plausible value."""
    env = _common_env()
    names = set(re.findall(r"\b([A-Z][A-Z0-9_]+)\s*=", env))
    body = _resource("google_cloudfunctions2_function", "function")
    per_function = str(_block(body, "service_config")["environment_variables"])
    names |= set(re.findall(r"\b([A-Z][A-Z0-9_]+)\s*=", per_function))
    if not vertex:
        names -= {"RAGBUS_VERTEX_INDEX", "RAGBUS_VERTEX_ENDPOINT", "RAGBUS_VERTEX_DEPLOYED_INDEX"}
    values = {name: "x" for name in names}
    values.update({
        "RAGBUS_RUNTIME": "gcp", "RAGBUS_LLM": "gemini", "RAGBUS_EMBEDDER": "genai",
        "RAGBUS_INDEX": "vertex" if vertex else "firestore", "RAGBUS_EMBED_DIMENSION": "768",
        "RAGBUS_MAX_DELIVERY_ATTEMPTS": "5", "RAGBUS_QUERY_TTL_DAYS": "30", "RAGBUS_TOMBSTONE_RETENTION_DAYS": "30",
        "RAGBUS_TRACING": "1",
        "RAGBUS_ACK_DEADLINE_S": "60", "RAGBUS_GEMINI_MODEL": "", "RAGBUS_GEMINI_LOCATION": "global",
        "RAGBUS_GEMINI_TIMEOUT_S": "40",
        "RAGBUS_OPENAI_BASE_URL": "https://llm.example.com/v1", "RAGBUS_OPENAI_MODEL": "m",
        "RAGBUS_OPENAI_TIMEOUT_S": "60", "RAGBUS_PDF_READER": "documentai",
        "RAGBUS_DOCUMENTAI_PROCESSOR": "projects/p/locations/eu/processors/0123abcd", "RAGBUS_DOCUMENTAI_LOCATION": "eu",
    })
    return {k: v for k, v in values.items() if k in names}


@pytest.mark.parametrize("vertex", [False, True])
def test_every_variable_the_gcp_runtime_needs_at_start_up_is_set_by_infra(vertex, monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # a function has no API key: Vertex AI by location
    env = _names_set_by_infra(vertex)
    require_gcp(load_settings(env))  # raises naming anything missing
    # and the check has teeth: without any one of what it needs, start-up is refused
    needed = ["GOOGLE_CLOUD_PROJECT", "RAGBUS_BUCKET", "GOOGLE_CLOUD_LOCATION"]
    if vertex:
        needed += ["RAGBUS_VERTEX_INDEX", "RAGBUS_VERTEX_ENDPOINT", "RAGBUS_VERTEX_DEPLOYED_INDEX"]
    for name in needed:
        assert name in env, f"infra/ does not set {name}"
        with pytest.raises(ConfigError, match=name):
            require_gcp(load_settings({k: v for k, v in env.items() if k != name}))


def test_the_vertex_variables_are_set_only_in_vertex_mode_and_from_the_deployed_resources():
    env = _common_env()
    assert "local.vertex_index ?" in env
    for name, resource in (("RAGBUS_VERTEX_INDEX", "google_vertex_ai_index.chunks[0].id"),
                           ("RAGBUS_VERTEX_ENDPOINT", "google_vertex_ai_index_endpoint.chunks[0].id"),
                           ("RAGBUS_VERTEX_DEPLOYED_INDEX",
                            "google_vertex_ai_index_endpoint_deployed_index.chunks[0].deployed_index_id")):
        assert re.search(rf"{name}\s*=\s*{re.escape(resource)}", env), name
    assert re.search(r"RAGBUS_INDEX\s*=\s*local\.index_backend", env)


# --------------------------------------------- llm_provider = "openai"


def _validations(variable: str) -> list[str]:
    return [v["condition"] for v in _tf()["variable"][variable].get("validation", [])]


def _preconditions() -> list[dict]:
    body = _resource("google_cloudfunctions2_function", "function")
    return _block(body, "lifecycle")["precondition"]


def test_openai_is_a_provider_infra_accepts():
    (condition,) = _validations("llm_provider")
    providers = set(re.findall(r'"(\w+)"', condition.split("]")[0]))
    assert "openai" in providers and providers == set(PROVIDER_NAMES)
    # the same the code accepts: anything else fails there too
    for provider in providers:
        row = PROVIDER_BY_NAME[provider]
        env = {"RAGBUS_LLM": provider, **{SETTING_BY_FIELD[r.setting].env: "https://llm.example.com/v1"
                                          if r.setting == row.base_url_setting else "m" for r in row.required}}
        assert load_settings(env).llm_provider == provider
    with pytest.raises(ConfigError, match="RAGBUS_LLM"):
        load_settings({"RAGBUS_LLM": "no-such-provider"})
    # every provider has its entry in each per-provider map the functions read
    for local in ("provider_env", "provider_secrets", "provider_roles"):
        assert set(_local(local)) == providers, local


def test_the_openai_settings_reach_the_functions_only_in_openai_mode():
    env = _common_env()
    assert "local.provider_env[var.llm_provider]" in env
    provider_env = _local("provider_env")
    assert provider_env["gemini"] == provider_env["local"] == {}  # gemini's are common (the embedder reads them)
    assert provider_env["openai"] == {"RAGBUS_OPENAI_BASE_URL": "${var.openai_base_url}",
                                      "RAGBUS_OPENAI_MODEL": "${var.openai_model}",
                                      "RAGBUS_OPENAI_TIMEOUT_S": "${tostring(var.openai_timeout_s)}"}
    # what the functions get is what the code needs to start: with them it loads, without it refuses
    values = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "https://llm.example.com/v1",
              "RAGBUS_OPENAI_MODEL": "m", "RAGBUS_OPENAI_TIMEOUT_S": str(_default("openai_timeout_s"))}
    settings = load_settings(values)
    assert (settings.openai_model, settings.openai_timeout_s) == ("m", 60.0)
    for name in ("RAGBUS_OPENAI_BASE_URL", "RAGBUS_OPENAI_MODEL"):
        with pytest.raises(ConfigError, match=name):
            load_settings({k: v for k, v in values.items() if k != name})


def test_plan_refuses_openai_without_a_server_a_model_or_with_a_key_in_clear_text():
    conditions = " ".join(p["condition"] for p in _preconditions())
    # functions.tf applies each provider's checks, which registry.tf derives from its row
    assert "${local.provider_checks[var.llm_provider].ready}" in conditions
    assert "!local.provider_checks[var.llm_provider].clear_key" in conditions
    assert "local.provider_checks[var.llm_provider].budget_s < each.value.timeout" in conditions
    checks = _local("provider_checks")
    assert set(checks) == set(PROVIDER_NAMES)
    assert checks["openai"]["ready"] == '${var.openai_base_url != "" && var.openai_model != ""}'
    assert 'startswith(var.openai_base_url, "https://")' in checks["openai"]["clear_key"]
    assert "var.openai_api_key_secret" in checks["openai"]["clear_key"]
    assert checks["openai"]["budget_s"] == "${2 * var.openai_timeout_s + 20}"
    assert checks["gemini"]["budget_s"] == "${3 * var.gemini_timeout_s + 5}"
    # the model functions' timeouts leave room, at the default call time limit, for the model check
    # and one call, each up to the limit, and the clamped backoffs between the code's attempts
    from shared.adapters import http_model
    from shared.adapters.gcp import gemini
    worst = 2 * _default("openai_timeout_s") + (http_model.ATTEMPTS - 1) * http_model.MAX_RETRY_AFTER_S
    assert worst == 2 * _default("openai_timeout_s") + 20, "the row's 20 s no longer matches the code"
    assert gemini.retry_budget_s(7.0) == 3 * 7.0 + 5, "the gemini row's budget no longer matches the code"
    functions = _local("functions")
    assert all(int(f["timeout"]) > worst for f in functions.values() if f["model"])
    url_rules = _validations("openai_base_url")
    assert any("@" in rule for rule in url_rules), "a user:password in the URL would sit in the plain environment"
    # so would a key in a query: plan refuses what the code refuses at start-up
    (query_rule,) = [rule for rule in url_rules if "[?#]" in rule]
    assert query_rule.startswith("${!can(regex(")
    for url in ("https://llm.example.com/v1?key=k", "https://llm.example.com/v1#k"):
        assert re.search("[?#]", url)
        with pytest.raises(ConfigError, match="query or fragment"):
            load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": url, "RAGBUS_OPENAI_MODEL": "m"})
    assert not re.search("[?#]", "https://llm.example.com/v1")


def test_the_openai_key_is_a_secret_only_the_model_functions_read():
    body = _resource("google_cloudfunctions2_function", "function")
    service = _block(body, "service_config")
    assert "RAGBUS_OPENAI_API_KEY" not in str(service["environment_variables"]) + _common_env()
    assert "RAGBUS_OPENAI_API_KEY" not in str(_local("provider_env"))
    assert _local("provider_secrets")["openai"] == {"RAGBUS_OPENAI_API_KEY": "${var.openai_api_key_secret}"}
    assert _local("provider_secrets")["gemini"] == _local("provider_secrets")["local"] == {}
    (secret_env,) = [d["secret_environment_variables"] for d in service["dynamic"]
                     if "local.model_secrets" in str(d["secret_environment_variables"])]
    assert secret_env["for_each"] == "${each.value.model ? local.model_secrets : {}}"
    content = secret_env["content"][0]
    assert content["key"] == "${secret_environment_variables.key}"  # RAGBUS_OPENAI_API_KEY, the name the code reads
    assert content["secret"] == "${secret_environment_variables.value}"
    assert content["version"] == "latest"
    assert load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "https://llm.example.com/v1",
                          "RAGBUS_OPENAI_MODEL": "m", "RAGBUS_OPENAI_API_KEY": "k"}).openai_api_key == "k"
    # only the chosen provider's secrets, only those given
    assert _local("model_secrets") == ('${{for name, secret in local.provider_secrets[var.llm_provider] : '
                                       'name => secret if secret != ""}}')
    grant = _resource("google_secret_manager_secret_iam_member", "model_secret")
    assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert grant["secret_id"] == "${each.value.secret}"
    assert grant["for_each"] == "${local.model_secret_grants}"
    assert "if f.model" in _local("model_secret_grants") and "local.model_secrets" in _local("model_secret_grants")
    assert "google_secret_manager_secret_iam_member.model_secret" in str(body["depends_on"])
    assert "secretmanager.googleapis.com" in _local("apis")
    (rule,) = _validations("openai_api_key_secret")
    assert "^[A-Za-z0-9_-]{0,255}$" in rule  # an id, as secret_environment_variables.secret takes it


def test_the_example_variables_are_declared_and_name_no_model_of_their_own():
    with (INFRA / "terraform.tfvars.example").open() as handle:
        example = _clean(hcl2.load(handle))
    declared = set(_tf()["variable"])
    assert set(example) <= declared, f"the example sets undeclared variables: {set(example) - declared}"
    # A pinned model id goes stale (the example once pinned gemini-2.0-flash, shut down on 2026-03-31):
    # the example inherits the code's default, kept current in one place.
    assert example["gemini_model"] == ""


# --------------------------------------------- a first apply on a new project


_REFERENCE = re.compile(r"\b(data\.)?(google_[a-z0-9_]+)\.([a-z0-9_]+)\b|\blocal\.([a-z0-9_]+)\b")
_API = ("resource", ("google_project_service", "api"))
_READ_AT_PLAN = ("resource", ("google_project_service", "read_at_plan"))


def _references(value: object) -> set[tuple[str, tuple[str, str]]]:
    """The resources, data sources and locals an expression names, as ("resource" | "data" |
    "local", key)."""
    found: set[tuple[str, tuple[str, str]]] = set()
    for text in re.findall(r"\$\{.*?\}|[A-Za-z_][\w.]*", str(value)):
        for data, rtype, name, local in _REFERENCE.findall(text):
            if local:
                found.add(("local", ("", local)))
            else:
                found.add(("data" if data else "resource", (rtype, name)))
    return found


def _waits_for(target: tuple[str, tuple[str, str]], node: tuple[str, tuple[str, str]],
               seen: set | None = None) -> bool:
    """Whether Terraform orders ``node`` after ``target``: a depends_on or a reference to it,
    or to something that is itself ordered after it."""
    seen = set() if seen is None else seen
    if node == target:
        return True
    if node in seen:
        return False
    seen.add(node)
    kind, key = node
    tf = _tf()
    body = {"resource": tf["resource"], "data": tf["data"]}.get(kind, {}).get(key)
    if kind == "local":
        body = tf["locals"].get(key[1])
    if body is None:
        return False
    return any(_waits_for(target, ref, seen) for ref in _references(body))


def _waits_for_the_apis(node: tuple[str, tuple[str, str]]) -> bool:
    return _waits_for(_API, node)


def test_every_google_resource_and_data_source_waits_for_the_apis():
    """A new project has only a default set of APIs on (not Cloud Resource Manager, IAM,
    Pub/Sub, ...): whatever calls one must come after the resource enabling it, or the first
    apply fails (e.g. service accounts before the IAM API, project IAM or data.google_project
    before Cloud Resource Manager)."""
    tf = _tf()
    resources = [("resource", key) for key in tf["resource"]
                 if key[0].startswith("google_") and key[0] != "google_project_service"]
    assert len(resources) > 40, "the test reads too little of infra/"
    late = [f"{key[0]}.{key[1]}" for _, key in resources if not _waits_for_the_apis(("resource", key))]
    assert not late, f"not ordered after the APIs are enabled: {late}"
    # the API list itself comes after what the data sources need, so waiting for it is waiting for both
    assert _waits_for(_READ_AT_PLAN, _API)
    data = [("data", key) for key in tf["data"] if key[0].startswith("google_")]
    assert {key for _, key in data} == {("google_project", "this"), ("google_storage_project_service_account", "gcs_agent")}
    for node in data:
        assert _waits_for(_READ_AT_PLAN, node), node
        # not on the whole list: a data source is read only during apply while its depends_on
        # has changes pending, and the IAM members naming the agents it reads would be replaced
        assert not _waits_for(_API, node), node


def test_the_ordering_check_has_teeth():
    # a service account with no depends_on, as iam.tf had: named as not waiting
    account = dict(_resource("google_service_account", "push_invoker"))
    assert _waits_for_the_apis(("resource", ("google_service_account", "push_invoker")))
    account.pop("depends_on")
    assert not any(_waits_for_the_apis(ref) for ref in _references(account))
    # a reference through a local counts: the dead-letter grants name the Pub/Sub agent via
    # local.pubsub_service_agent, which reads data.google_project.this
    assert ("data", ("google_project", "this")) in _references(_local("pubsub_service_agent"))
    assert _waits_for(_READ_AT_PLAN, ("local", ("", "pubsub_service_agent")))


_RESOURCE_MANAGER = ("resource", ("google_project_service", "resource_manager"))


def test_resource_manager_is_enabled_alone_before_any_other_service_is_enabled_or_read():
    """The provider reads every google_project_service back through Cloud Resource Manager: in the
    plan's order, Resource Manager comes first and alone, then Storage (the data sources' other
    API), then every other API, then everything that uses them."""
    manager = _resource("google_project_service", "resource_manager")
    assert manager["service"] == "cloudresourcemanager.googleapis.com"
    assert "for_each" not in manager and "depends_on" not in manager  # nothing before it
    assert _waits_for(_RESOURCE_MANAGER, _READ_AT_PLAN) and _waits_for(_RESOURCE_MANAGER, _API)
    assert not _waits_for(_READ_AT_PLAN, _RESOURCE_MANAGER) and not _waits_for(_API, _RESOURCE_MANAGER)
    for key in _tf()["resource"]:
        if key[0] == "google_project_service" and key != _RESOURCE_MANAGER[1]:
            assert _waits_for(_RESOURCE_MANAGER, ("resource", key)), key
    for key in _tf()["data"]:  # every Google data source (archive_file zips the source locally)
        if key[0].startswith("google_"):
            assert _waits_for(_RESOURCE_MANAGER, ("data", key)), key
    moved = [m for m in _parsed("apis.tf")["moved"] if "resource_manager" in m["to"]]
    assert moved and moved[0]["from"] == '${google_project_service.read_at_plan["cloudresourcemanager.googleapis.com"]}'


def test_the_apis_a_new_project_lacks_are_enabled_first():
    apis = _local("apis")
    read_at_plan = _resource("google_project_service", "read_at_plan")
    # project IAM and data.google_project call Cloud Resource Manager (resource_manager); the GCS agent lookup Storage
    assert read_at_plan["for_each"] == '${toset(["storage.googleapis.com"])}'
    for api in ("iam.googleapis.com", "pubsub.googleapis.com", "run.googleapis.com",
                "cloudfunctions.googleapis.com", "firestore.googleapis.com", "secretmanager.googleapis.com"):
        assert api in apis, api
    assert len(apis) == len(set(apis))
    assert not {"cloudresourcemanager.googleapis.com", "storage.googleapis.com"} & set(apis)  # one owner each
    # storage.googleapis.com moved from the list: its state moves with it
    (moved,) = [m for m in _parsed("apis.tf")["moved"] if "storage" in m["from"]]
    assert moved["from"] == '${google_project_service.api["storage.googleapis.com"]}'
    assert moved["to"] == '${google_project_service.read_at_plan["storage.googleapis.com"]}'
    # the Pub/Sub agent's grant on the push identity needs the IAM API and the agent itself
    assert "${google_project_service.api}" in _resource(
        "google_service_account_iam_member", "pubsub_agent_mints_push_tokens")["depends_on"]


def test_a_provider_s_roles_go_to_the_model_calling_functions_only():
    assert _local("provider_roles")["gemini"] == ["roles/aiplatform.user"]  # Gemini on Vertex AI
    bindings = str(_local("function_project_bindings"))
    assert "local.provider_roles[var.llm_provider]" in bindings
    assert "name if f.model" in bindings
    assert 'var.llm_provider == "gemini"' not in bindings  # the registry says it, not a hand-written test
