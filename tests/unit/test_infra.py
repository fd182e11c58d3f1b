"""infra/ deploys what the code expects: every consumer, entry point, identity and index.

Terraform is read offline with python-hcl2. Resources iterate over literal locals
(``local.consumers``, ``local.functions``, ``local.topics``), so the tests expand
each ``for_each`` themselves and resolve ``each.*`` and ``var.*`` in the attributes
they check; references to other resources (``google_pubsub_topic.dead_letter["x"].id``)
are followed to the instance they name.
"""

from __future__ import annotations

import importlib
import itertools
import json
import re
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import hcl2
import pytest

from shared.contract import state_collections, topics
from shared.contract.config import Settings
from shared.contract.errors import ConfigError
from shared.contract.filters import Filters
from shared.contract.messages import FeedPollRequested, decode
from shared.runtime.stages import CONSUMERS, QUERY_STAGES, STAGE_BY_NAME
from tests.support import root_main

INFRA = Path(__file__).resolve().parents[2] / "infra"

# ----------------------------------------------------------------- reading .tf


def _clean(value: Any) -> Any:
    """hcl2 output without its quoting: literal strings and map keys lose their quotes."""
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items() if k not in ("__is_block__", "__comments__")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@cache
def _tf() -> dict[str, Any]:
    merged: dict[str, Any] = {"resource": {}, "locals": {}, "variable": {}, "data": {}, "output": {}}
    for path in sorted(INFRA.glob("*.tf")):
        with path.open() as handle:
            parsed = _clean(hcl2.load(handle))
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                for name, body in named.items():
                    merged["resource"][(rtype, name)] = body
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
        for block in parsed.get("variable", []):
            merged["variable"].update(block)
        for block in parsed.get("output", []):
            merged["output"].update(block)
        for block in parsed.get("data", []):
            for dtype, named in block.items():
                for name, body in named.items():
                    merged["data"][(dtype, name)] = body
    return merged


def _local(name: str) -> Any:
    return _tf()["locals"][name]


def _default(variable: str) -> Any:
    return _tf()["variable"][variable].get("default")


def _resource(rtype: str, name: str) -> dict[str, Any]:
    return _tf()["resource"][(rtype, name)]


_EACH = re.compile(r"each\.(key|value)((?:\.\w+)*)")


def _substitute(text: str, key: str, value: Any) -> str:
    """``text`` with each.key / each.value[.attr] / var.x replaced by their values.

    Inside a larger expression (an index, a function call) a value is quoted, as
    Terraform would need it; a template segment that is only the reference becomes
    the bare value.
    """

    def lookup(match: re.Match[str]) -> Any:
        resolved: Any = key if match.group(1) == "key" else value
        for attr in filter(None, match.group(2).split(".")):
            resolved = resolved[attr]
        return resolved

    def segment(match: re.Match[str]) -> str:
        inner = match.group(1)
        variable = re.fullmatch(r"var\.(\w+)", inner)
        if variable and _default(variable.group(1)) is not None:
            return str(_default(variable.group(1)))
        whole = _EACH.fullmatch(inner)
        if whole:
            resolved = lookup(whole)
            return resolved if isinstance(resolved, str) else json.dumps(resolved)
        return "${" + _EACH.sub(lambda m: json.dumps(lookup(m)), inner) + "}"

    return re.sub(r"\$\{((?:[^{}]|\{[^{}]*\})*)\}", segment, text)


def _resolve(body: Any, key: str, value: Any) -> Any:
    if isinstance(body, dict):
        return {k: _resolve(v, key, value) for k, v in body.items()}
    if isinstance(body, list):
        return [_resolve(v, key, value) for v in body]
    if isinstance(body, str):
        return _substitute(body, key, value)
    return body


def _instances(rtype: str, name: str) -> dict[str, dict[str, Any]]:
    """The resource's instances by for_each key, with each.* and var.* resolved."""
    body = _resource(rtype, name)
    for_each = body.get("for_each")
    if for_each is None:
        return {"": _resolve(body, "", None)}
    toset = re.fullmatch(r"\$\{toset\(local\.(\w+)\)\}", for_each)
    plain = re.fullmatch(r"\$\{local\.(\w+)\}", for_each)
    if toset:
        items = {v: v for v in _local(toset.group(1))}
    elif plain:
        items = _local(plain.group(1))
    else:
        raise AssertionError(f"{rtype}.{name}: the test cannot expand for_each = {for_each}")
    return {k: _resolve(body, k, v) for k, v in items.items()}


_REF = re.compile(r'^\$\{(google_\w+)\.(\w+)\["([^"]+)"\]((?:\.\w+|\[\d+\])*)\}(.*)$')


def _follow(expression: str) -> tuple[str, str, dict[str, Any], str]:
    """(resource type, resource name, instance, rest) of a reference to an instance."""
    match = _REF.match(expression)
    assert match, f"{expression!r} is not a reference to one resource instance"
    rtype, name, key, _attr, rest = match.groups()
    instances = _instances(rtype, name)
    assert key in instances, f"{rtype}.{name}[{key!r}] is not declared"
    return rtype, name, instances[key], rest


def _block(body: dict[str, Any], name: str) -> dict[str, Any]:
    blocks = body.get(name) or []
    assert len(blocks) == 1, f"expected one {name} block, found {len(blocks)}"
    return blocks[0]


def _functions() -> dict[str, dict[str, Any]]:
    return _instances("google_cloudfunctions2_function", "function")


def _all_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _all_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _all_strings(v)]
    return [value] if isinstance(value, str) else []


# ----------------------------------------------------------------- consumers


def test_local_consumers_mirror_the_code_table():
    declared = _local("consumers")
    assert set(declared) == {c.subscription for c in CONSUMERS}
    for consumer in CONSUMERS:
        entry = declared[consumer.subscription]
        assert (entry["stage"], entry["topic"]) == (consumer.stage, consumer.topic)
        assert entry["function"] in _local("functions")


def test_every_consumer_has_one_push_subscription_with_dead_lettering():
    subscriptions = _instances("google_pubsub_subscription", "consumer")
    for consumer in CONSUMERS:
        named = [s for s in subscriptions.values() if s["name"] == consumer.subscription]
        assert len(named) == 1, f"{consumer.subscription}: {len(named)} subscriptions"
        sub = named[0]

        _, _, topic, _ = _follow(sub["topic"])
        assert topic["name"] == consumer.topic

        policy = _block(sub, "dead_letter_policy")
        rtype, rname, dead_letter, _ = _follow(policy["dead_letter_topic"])
        assert (rtype, rname) == ("google_pubsub_topic", "dead_letter")
        assert dead_letter["name"] == topics.dead_letter_topic(consumer.topic)
        assert policy["max_delivery_attempts"] == str(_default("max_delivery_attempts"))
        assert _resource("google_pubsub_subscription", "consumer")["dead_letter_policy"][0][
            "max_delivery_attempts"
        ] == "${var.max_delivery_attempts}"

        retry = _block(sub, "retry_policy")
        for bound in ("minimum", "maximum"):
            assert retry[f"{bound}_backoff"] == (f"${{coalesce(var.retry_{bound}_backoff, "
                                                 f'local.consumer_backoff["{consumer.subscription}"].{bound})}}')
        assert _backoff(consumer.subscription) in _local("retry_backoff").values()

        push = _block(sub, "push_config")
        rtype, _, function, rest = _follow(push["push_endpoint"])
        assert rtype == "google_cloudfunctions2_function"
        assert rest == "/projects/${var.project}/topics/" + consumer.topic
        assert _block(function, "build_config")["entry_point"] == consumer.stage
        token = _block(push, "oidc_token")
        assert token["service_account_email"] == "${google_service_account.push_invoker.email}"
        assert token["audience"] == push["push_endpoint"].removesuffix(rest)


def test_every_dead_letter_topic_pushes_to_the_dead_letter_recorder():
    recorders = _instances("google_pubsub_subscription", "dead_letter_recorder")
    dead_topics = {n["name"] for n in _instances("google_pubsub_topic", "dead_letter").values()}
    assert dead_topics == {topics.dead_letter_topic(t) for t in topics.ALL_TOPICS}
    fed = set()
    for sub in recorders.values():
        _, _, topic, _ = _follow(sub["topic"])
        fed.add(topic["name"])
        assert sub["name"] == f"dead_letters.{topic['name']}"
        push = _block(sub, "push_config")
        rtype, _, function, rest = _follow(push["push_endpoint"])
        assert rtype == "google_cloudfunctions2_function"
        assert _block(function, "build_config")["entry_point"] == "dead_letters"
        assert rest == "/projects/${var.project}/topics/" + topic["name"]
        assert _block(push, "oidc_token")["service_account_email"] == "${google_service_account.push_invoker.email}"
        assert "dead_letter_policy" not in sub  # a dead letter is never dead-lettered again
    assert fed == dead_topics
    # the function the subscriptions push to is served by the root main.py
    assert root_main().dead_letters is importlib.import_module("services.dead_letters.main").dead_letters


def test_ack_deadline_is_the_function_timeout():
    body = _resource("google_pubsub_subscription", "consumer")
    assert body["ack_deadline_seconds"] == "${local.functions[each.value.function].timeout}"
    for name, function in _local("functions").items():
        assert 10 <= function["timeout"] <= 600, f"{name}: a push ack deadline must be 10-600 s"


def _backoff(subscription: str) -> dict[str, str]:
    """The retry backoff local.consumer_backoff gives a consumer, as its for expression would."""
    assert _local("consumer_backoff") == (
        "${{for name, c in local.consumers : name => contains(local.query_stages, c.stage) ? "
        "local.retry_backoff.query : local.retry_backoff.ingestion}}")
    stage = _local("consumers")[subscription]["stage"]
    return _local("retry_backoff")["query" if stage in _local("query_stages") else "ingestion"]


def _seconds(duration: str) -> int:
    assert duration.endswith("s"), duration
    return int(duration[:-1])


def _retry_window_s(attempts: int, backoff: dict[str, str], growth: float = 1.3) -> float:
    """How long Pub/Sub keeps retrying a message refused on every delivery before it is
    dead-lettered: the waits between ``attempts`` deliveries, growing by ``growth`` from the
    minimum to the maximum backoff. Pub/Sub documents the growth only as exponential; 1.3 is
    the Pub/Sub emulator's (slower than doubling, so the window is not overstated)."""
    low, high = _seconds(backoff["minimum"]), _seconds(backoff["maximum"])
    return sum(min(high, low * growth**k) for k in range(attempts - 1))


def test_delivery_attempts_are_pubsubs_maximum_and_reach_the_code():
    # Cloud Run's 429 (no free instance) is a NACK: a burst spends attempts on work that never
    # ran, so the subscriptions allow Pub/Sub's maximum. The local bus never refuses for
    # capacity and keeps its own default.
    assert _default("max_delivery_attempts") == 100
    assert Settings().max_delivery_attempts <= 100
    assert "RAGBUS_MAX_DELIVERY_ATTEMPTS = tostring(var.max_delivery_attempts)" in _local("common_env")
    # null: each subscription keeps the backoff of its class; set, they override every one
    assert _default("retry_minimum_backoff") is None and _default("retry_maximum_backoff") is None


def test_query_hops_retry_within_a_question_and_ingestion_spreads_out():
    backoff = _local("retry_backoff")
    assert backoff["ingestion"] == {"minimum": "10s", "maximum": "600s"}  # Pub/Sub's defaults
    assert _seconds(backoff["query"]["maximum"]) <= Settings().query_timeout_s
    assert _local("query_stages") == list(QUERY_STAGES)
    recorder = _block(_resource("google_pubsub_subscription", "dead_letter_recorder"), "retry_policy")
    assert recorder["minimum_backoff"] == "${coalesce(var.retry_minimum_backoff, local.retry_backoff.ingestion.minimum)}"
    for policy in backoff.values():
        assert 0 <= _seconds(policy["minimum"]) <= _seconds(policy["maximum"]) <= 600  # Pub/Sub's bounds


def test_a_burst_drains_long_before_its_messages_run_out_of_attempts():
    """A 1,000-message burst on any consumer but the feed poller (fed one request per 15
    minutes by the scheduler) drains within the retry window even if every message took its
    function's whole timeout on max_instances x concurrency slots."""
    attempts = _default("max_delivery_attempts")
    functions = _local("functions")
    for name, consumer in _local("consumers").items():
        if consumer["topic"] == topics.FEED_POLL_REQUESTED:
            continue
        f = functions[consumer["function"]]
        slots = int(f["max_instances"]) * int(f["concurrency"])
        drain_s = 1000 * int(f["timeout"]) / slots
        window_s = _retry_window_s(attempts, _backoff(name))
        assert drain_s < window_s, f"{name}: drains in {drain_s:.0f} s, retried for {window_s:.0f} s"
        # the old 5 attempts covered less than a tenth of that
        assert _retry_window_s(5, _backoff(name)) < drain_s / 10


def test_every_dead_letter_topic_can_be_fed_by_the_pubsub_agent():
    binding = _resource("google_pubsub_topic_iam_member", "pubsub_agent_dead_letter_publisher")
    assert binding["for_each"] == "${google_pubsub_topic.dead_letter}"
    assert binding["role"] == "roles/pubsub.publisher"
    assert "gcp-sa-pubsub" in _local("pubsub_service_agent")
    subscriber = _resource("google_pubsub_subscription_iam_member", "pubsub_agent_source_subscriber")
    assert subscriber["for_each"] == "${google_pubsub_subscription.consumer}"
    assert subscriber["role"] == "roles/pubsub.subscriber"


def test_every_consumed_topic_has_a_publisher():
    published = {t for f in _local("functions").values() for t in f["publishes"]}
    scheduled = {_follow(_block(_instances("google_cloud_scheduler_job", "feed_poll")[""],
                                "pubsub_target")["topic_name"])[2]["name"]}
    for consumer in CONSUMERS:
        assert consumer.topic in published | scheduled, f"nothing publishes {consumer.topic}"
    assert published <= set(topics.ALL_TOPICS)


# ----------------------------------------------------------------- functions


def test_functions_deploy_one_source_with_python313():
    for name, function in _functions().items():
        build = _block(function, "build_config")
        assert build["runtime"] == "python313", name
        storage = _block(_block(build, "source"), "storage_source")
        assert storage["object"] == "${google_storage_bucket_object.source.name}", name
    assert {f["function"] for f in _local("consumers").values()} <= set(_functions())


def test_source_archive_leaves_out_tests_and_virtualenvs():
    excludes = _local("source_excludes")
    for pattern in (".venv/**", "tests/**", ".git/**", "infra/**", "**/__pycache__/**"):
        assert pattern in excludes


@pytest.mark.parametrize("function", sorted(_local("functions")))
def test_entry_point_is_exposed_by_root_main(function):
    main = root_main()
    entry_point = _local("functions")[function]["entry_point"]
    assert hasattr(main, entry_point), f"main.py has no {entry_point!r} (function {function})"


def test_stage_entry_points_are_the_stage_functions():
    import functions_framework._function_registry as registry

    main = root_main()
    for name, function in _local("functions").items():
        stage = STAGE_BY_NAME[function["stage"]]
        target = getattr(main, function["entry_point"])
        if stage.generated_entry_point:
            # made from the registry: a CloudEvent function functions-framework knows by this name
            assert target.__name__ == function["entry_point"] == stage.name, name
            assert registry.REGISTRY_MAP[stage.name] == registry.CLOUDEVENT_SIGNATURE_TYPE, name
        elif function["trigger"] in ("pubsub", "http"):
            module = importlib.import_module(stage.entry_module)
            assert target is getattr(module, function["stage"]), name


def test_functions_run_the_gcp_runtime_with_their_settings():
    env = _local("common_env")
    assert 'RAGBUS_RUNTIME = "gcp"' in env
    for name in ("GOOGLE_CLOUD_PROJECT = var.project", "GOOGLE_CLOUD_LOCATION", "RAGBUS_BUCKET =",
                 "RAGBUS_LLM = var.llm_provider", "RAGBUS_GEMINI_MODEL = var.gemini_model",
                 "RAGBUS_MAX_DELIVERY_ATTEMPTS"):
        assert name in env, f"{name} is not set for the functions"
    assert "RAGBUS_EMBED_DIMENSION = tostring(var.embedding_dimension)" in env
    # Names the code already reads must be spelled as the code spells them.
    code = "\n".join(p.read_text() for p in (INFRA.parent / "shared").rglob("*.py"))
    for name in ("RAGBUS_RUNTIME", "RAGBUS_BUCKET", "RAGBUS_LLM", "RAGBUS_GEMINI_MODEL",
                 "RAGBUS_EMBED_MODEL", "RAGBUS_EMBED_DIMENSION", "RAGBUS_MAX_DELIVERY_ATTEMPTS",
                 "RAGBUS_ACK_DEADLINE_S", "RAGBUS_TRACING"):
        assert name in code, f"infra sets {name}, which nothing in shared/ reads"
    for name, function in _functions().items():
        service = _block(function, "service_config")
        assert service["service_account_email"] == f'${{google_service_account.function["{name}"].email}}'
        assert service["timeout_seconds"] == str(_local("functions")[name]["timeout"])


def test_embedder_stages_get_memory_for_the_model():
    functions = _local("functions")
    for name in ("indexer-document-cleaned", "retriever", "gateway"):
        assert functions[name]["memory"] == "2Gi"


def test_gcs_events_trigger_their_functions_through_eventarc():
    functions = _local("functions")
    triggers = {f["entry_point"]: f["trigger"] for f in functions.values()}
    assert triggers["gcs_finalized"] == "google.cloud.storage.object.v1.finalized"
    assert triggers["gcs_deleted"] == "google.cloud.storage.object.v1.deleted"
    dynamic = _resource("google_cloudfunctions2_function", "function")["dynamic"][0]["event_trigger"]
    content = dynamic["content"][0]
    assert content["retry_policy"] == "RETRY_POLICY_RETRY"
    assert content["event_filters"][0]["attribute"] == "bucket"
    assert content["event_filters"][0]["value"] == "${google_storage_bucket.documents.name}"
    assert content["service_account_email"] == "${google_service_account.eventarc_trigger.email}"


# ----------------------------------------------------------------- identities


def test_each_function_has_its_own_service_account():
    accounts = _instances("google_service_account", "function")
    assert set(accounts) == set(_local("functions"))
    ids = [a["account_id"] for a in accounts.values()]
    assert len(ids) == len(set(ids))
    for account_id in ids + ["rb-pubsub-push", "rb-eventarc-trigger"]:
        assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", account_id), account_id
    used = [_block(f, "service_config")["service_account_email"] for f in _functions().values()]
    assert len(used) == len(set(used))


def test_no_identity_gets_owner_or_editor():
    roles = [s for s in _all_strings(_tf()) if s.startswith("roles/")]
    assert roles, "no role found: the test reads nothing"
    assert not {"roles/owner", "roles/editor"} & set(roles)


def test_project_level_roles_are_only_the_unavoidable_ones():
    allowed = {
        "roles/datastore.user", "roles/aiplatform.user", "roles/logging.logWriter",
        "roles/telemetry.tracesWriter", "roles/monitoring.metricWriter",
    }
    assert set(_local("function_project_roles")) <= allowed
    assert "telemetry.googleapis.com" in _local("apis"), "traces go to the Telemetry API: it must be enabled"
    assert _resource("google_project_iam_member", "eventarc_trigger_receiver")["role"] == "roles/eventarc.eventReceiver"
    agent = _resource("google_project_iam_member", "gcs_agent_publishes_events")
    assert agent["role"] == "roles/pubsub.publisher" and "gcs_agent" in agent["member"]
    project_bindings = {k for (t, k) in _tf()["resource"] if t == "google_project_iam_member"}
    assert project_bindings == {"function", "eventarc_trigger_receiver", "gcs_agent_publishes_events", "build"}
    # the build identity's roles are the ones Cloud Run functions documents for a build account
    assert set(_local("build_project_roles")) == {
        "roles/logging.logWriter", "roles/artifactregistry.writer", "roles/storage.objectAdmin"}


def test_publishing_is_granted_per_topic():
    binding = _resource("google_pubsub_topic_iam_member", "function_publisher")
    assert binding["topic"] == "${google_pubsub_topic.topic[each.value.topic].id}"
    assert binding["role"] == "roles/pubsub.publisher"
    functions = _local("functions")
    assert functions["feed-poller"]["publishes"] == ["document-fetched", "document-deleted"]
    assert "query-submitted" in functions["gateway"]["publishes"]
    assert functions["grader"]["publishes"] == ["query-graded"]


def test_only_the_push_account_and_eventarc_invoke_event_functions():
    push = _resource("google_cloud_run_v2_service_iam_member", "push_invoker")
    assert push["for_each"] == "${local.pubsub_functions}"
    assert push["role"] == "roles/run.invoker"
    assert push["member"] == "${google_service_account.push_invoker.member}"
    eventarc = _resource("google_cloud_run_v2_service_iam_member", "eventarc_invoker")
    assert eventarc["for_each"] == "${local.gcs_functions}"


def test_gateway_is_private_unless_asked():
    assert _default("allow_unauthenticated_gateway") is False
    assert _default("gateway_invokers") == []
    binding = _resource("google_cloud_run_v2_service_iam_member", "gateway_invoker")
    assert "var.allow_unauthenticated_gateway" in binding["for_each"]
    all_users = [s for s in _all_strings(_tf()["resource"]) if "allUsers" in s]
    assert all_users == [binding["for_each"]]


# ----------------------------------------------------------------- firestore


def test_vector_index_on_chunk_embeddings_has_the_configured_dimension():
    index = _instances("google_firestore_index", "chunks_embedding")[""]
    assert index["collection"] == "chunks"
    vector = [f for f in index["fields"] if "vector_config" in f]
    assert len(vector) == 1 and vector[0]["field_path"] == "embedding"
    config = vector[0]["vector_config"][0]
    assert config["dimension"] == str(_default("embedding_dimension"))
    raw = [f for f in _resource("google_firestore_index", "chunks_embedding")["fields"] if "vector_config" in f]
    assert raw[0]["vector_config"][0]["dimension"] == "${var.embedding_dimension}"
    assert "flat" in config
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    # The default embedder is the packaged model: the index must take its vectors.
    assert _default("embedder") == "local"
    assert _default("embedding_dimension") == OnnxMiniLMEmbedder.dimension


def test_query_records_expire_by_ttl():
    field = _instances("google_firestore_field", "queries_expire_at")[""]
    assert field["collection"] == state_collections.QUERIES
    assert field["field"] == "expire_at"
    assert "ttl_config" in field


def test_conversations_expire_by_ttl():
    field = _instances("google_firestore_field", "conversations_expire_at")[""]
    assert field["collection"] == state_collections.CONVERSATIONS
    assert field["field"] == "expire_at"
    assert "ttl_config" in field


def test_tombstones_expire_by_ttl_after_every_message_pub_sub_holds():
    from shared.ingest.processed_items import PUBSUB_RETENTION_DAYS

    field = _instances("google_firestore_field", "processed_items_expire_at")[""]
    assert field["collection"] == state_collections.PROCESSED_ITEMS
    assert field["field"] == "expire_at"
    assert "ttl_config" in field
    # a tombstone expires no sooner than Pub/Sub drops the last message it may have to refuse
    for name in ("consumer", "dead_letter_inbox", "dead_letter_recorder"):
        kept = _resource("google_pubsub_subscription", name)["message_retention_duration"]
        assert int(kept.removesuffix("s")) <= PUBSUB_RETENTION_DAYS * 86400, (name, kept)


def test_large_fields_are_exempt_from_single_field_indexes():
    fields = _instances("google_firestore_field", "unindexed")
    exempt = {(f["collection"], f["field"]) for f in fields.values()}
    # the fields that grow with a query (iterations x contexts) or hold whole texts
    assert {(state_collections.QUERIES, "iterations"), (state_collections.QUERIES, "events"),
            (state_collections.QUERIES, "answer"), (state_collections.QUERIES, "citations"),
            ("chunks", "text"), (state_collections.DEAD_LETTERS, "data")} <= exempt
    for field in fields.values():
        # an empty index_config is what removes the automatic indexes
        assert field["index_config"] == [{}], field
    # no exempt field is one the code filters or orders on
    filtered = {("processed_items", "feed_url"), ("processed_items", "source"), ("queries", "status"),
                ("queries", "created_at"), ("queries", "deadline"), ("dead_letters", "subscription"),
                ("dead_letters", "at"), ("index_documents", "indexed")}
    assert not exempt & filtered


def test_composite_indexes_name_real_collections():
    known = {state_collections.FEEDS, state_collections.PROCESSED_ITEMS, state_collections.DOCUMENTS,
             state_collections.QUERIES, state_collections.DEAD_LETTERS, "chunks"}
    indexes = [body for (t, _), body in _tf()["resource"].items() if t == "google_firestore_index"]
    assert {i["collection"] for i in indexes} <= known
    by_feed = _resource("google_firestore_index", "processed_items_by_feed")
    assert [f["field_path"] for f in by_feed["fields"]] == ["feed_url", "source"]
    assert _resource("google_firestore_database", "main")["type"] == "FIRESTORE_NATIVE"


# ----------------------------------------------------------------- scheduler


def test_scheduler_publishes_a_valid_feed_poll_request():
    job = _instances("google_cloud_scheduler_job", "feed_poll")[""]
    assert job["schedule"] == "*/15 * * * *"
    target = _block(job, "pubsub_target")
    assert _follow(target["topic_name"])[2]["name"] == topics.FEED_POLL_REQUESTED
    assert target["data"] == "${base64encode(local.feed_poll_message)}"
    assert target["attributes"] == "${local.feed_poll_attributes}"
    attributes = _local("feed_poll_attributes")
    assert attributes["type"] == "FeedPollRequested"
    assert attributes["schema_version"] == str(FeedPollRequested.SCHEMA_VERSION)
    body = _hcl_object_to_json(_local("feed_poll_message"))
    message = decode(body.encode(), attributes)
    assert isinstance(message, FeedPollRequested)
    assert message.feed_urls == []
    assert attributes["idempotency_key"] == message.idempotency_key()


def _hcl_object_to_json(expression: str) -> str:
    """The JSON that ``jsonencode({k = "v", ...})`` of literal values produces."""
    match = re.fullmatch(r"\$\{jsonencode\((\{.*\})\)\}", expression, re.S)
    assert match, f"{expression!r} is not jsonencode of a literal object"
    return re.sub(r"(\w+)\s*=", r'"\1":', match.group(1))


# ----------------------------------------------------------------- buckets, monitoring


def test_buckets_use_uniform_access_and_are_never_public():
    for name in ("blobs", "documents", "source"):
        bucket = _resource("google_storage_bucket", name)
        assert bucket["uniform_bucket_level_access"] is True, name
        assert bucket["public_access_prevention"] == "enforced", name


def test_dashboard_charts_functions_pubsub_and_ragbus_metrics():
    dashboard = json.loads((INFRA / "dashboard.json").read_text())
    filters = [
        data_set["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
        for tile in dashboard["mosaicLayout"]["tiles"]
        for data_set in tile["widget"]["xyChart"]["dataSets"]
    ]
    text = "\n".join(filters)
    for metric in (
        "run.googleapis.com/request_count",
        "pubsub.googleapis.com/subscription/num_undelivered_messages",
        "pubsub.googleapis.com/subscription/dead_letter_message_count",
        "workload.googleapis.com/ragbus.queries",
        "workload.googleapis.com/ragbus.refinements",
        "workload.googleapis.com/ragbus.stage.duration",
        "workload.googleapis.com/ragbus.ingested.chunks",
        "workload.googleapis.com/ragbus.dead_letters",
        "workload.googleapis.com/ragbus.model.unusable",
        "workload.googleapis.com/ragbus.feedback",
    ):
        assert f'metric.type="{metric}"' in text, metric
    assert any("response_code_class" in f for f in filters), "no error chart"
    assert any('ends_with("-dead-letter")' in f for f in filters), "no dead-letter topic chart"


def test_outputs_name_the_gateway_and_buckets():
    outputs = _tf()["output"]
    assert {"gateway_url", "blobs_bucket", "documents_bucket"} <= set(outputs)
    assert 'function["gateway"]' in outputs["gateway_url"]["value"]


def test_only_the_http_function_trusts_the_front_ends_forwarded_scheme():
    """Cloud Run terminates TLS: the gateway must trust X-Forwarded-Proto from its front end
    (FORWARDED_ALLOW_IPS) or the page's https POST is refused as cross-origin; the
    event-driven functions have no browser callers and keep the server's default."""
    env = _block(_resource("google_cloudfunctions2_function", "function"), "service_config")["environment_variables"]
    assert 'each.value.trigger == "http" ? {FORWARDED_ALLOW_IPS = "*"} : {}' in env
    assert "FORWARDED_ALLOW_IPS" not in str(_local("common_env"))
    http = [name for name, f in _local("functions").items() if f["trigger"] == "http"]
    assert http == ["gateway"]


def test_the_gateway_alone_reads_its_api_token_from_secret_manager():
    assert _default("gateway_api_token_secret") == ""
    function = _resource("google_cloudfunctions2_function", "function")
    secrets = _block(function, "service_config")["dynamic"]
    token = [d["secret_environment_variables"] for d in secrets
             if "RAGBUS_API_TOKEN" in str(d.get("secret_environment_variables"))]
    assert token and 'each.value.trigger == "http"' in str(token[0]["for_each"])
    access = _resource("google_secret_manager_secret_iam_member", "gateway_api_token")
    assert access["role"] == "roles/secretmanager.secretAccessor"
    assert 'f.trigger == "http"' in access["for_each"]
    assert "google_secret_manager_secret_iam_member.gateway_api_token" in str(function["depends_on"])


def test_each_function_runs_as_many_threads_as_cloud_run_sends_it():
    """Cloud Run admits `concurrency` requests to an instance; functions-framework serves them
    with THREADS gunicorn threads (4 per CPU by default), so the two are set equal, as Cloud Run
    functions' concurrency page recommends for Python."""
    import inspect

    from functions_framework._http import gunicorn

    assert 'os.environ.get("THREADS"' in inspect.getsource(gunicorn.GunicornApplication.__init__)
    env = str(_block(_resource("google_cloudfunctions2_function", "function"), "service_config")
              ["environment_variables"])
    assert "THREADS = tostring(each.value.concurrency)" in env
    for name, function in _local("functions").items():
        assert 1 <= int(function["concurrency"]) <= 1000, name  # Cloud Run's bounds
        if int(function["concurrency"]) > 1:
            assert float(function["cpu"]) >= 1, f"{name}: concurrency above 1 needs a whole vCPU"


def _accepted_filter_combinations() -> list[Filters]:
    """One Filters per combination of conditions the filter language accepts: kind or not, source,
    one metadata key, two keys, a chunk-field key or no array condition, and since, until, both or
    no date (``where`` beyond two keys adds nothing new to the shape)."""
    now = datetime(2026, 11, 26, tzinfo=UTC)
    kinds = [None, "feed"]
    arrays = [{}, {"source": "https://example.com/feed"}, {"where": {"author": "ada"}},
              {"where": {"author": "ada", "category": "gpu"}}, {"where": {"title": "GPUs"}},
              {"source": "https://example.com/feed", "where": {"author": "ada"}}]
    dates = [{}, {"since": "30d"}, {"until": "2026-06-01"}, {"since": "2025-01-01", "until": "2026-01-01"}]
    return [Filters.parse(now=now, kind=kind, **array, **dated)
            for kind, array, dated in itertools.product(kinds, arrays, dates)]


def test_every_prefilter_the_firestore_index_sends_keeps_to_firestores_documented_query_rules():
    """The where clauses before find_nearest, checked against what Firestore documents (issue 32.7):
    StructuredQuery runs where before findNearest ("applies after all other filters and ordering",
    the v1 REST reference), so a range on the published time is a pre-filter; a range operator needs
    its field first in order_by (FieldFilter.Operator), so every range is on one field, published_ts;
    one array-contains per query, and a composite index holds at most one array field
    (cloud.google.com/firestore/docs/concepts/index-overview); equality on the kind. A combination
    outside these is refused by name before Firestore is asked, never filtered after the top k."""
    from shared.adapters.gcp.firestore_index import PUBLISHED_FIELD, prefilter_clauses

    seen_ops = set()
    for filters in _accepted_filter_combinations():
        try:
            clauses = prefilter_clauses(filters)
        except ConfigError as exc:
            assert any(f"where {key}" in str(exc) for key, _ in filters.where), exc
            continue
        ops = [op for _, op, _ in clauses]
        seen_ops |= set(ops)
        assert ops.count("array_contains") <= 1, filters.describe()
        assert {f for f, op, _ in clauses if op in (">=", "<", ">", "<=")} <= {PUBLISHED_FIELD}, filters.describe()
        assert {f for f, op, _ in clauses if op == "=="} <= {"source"}, filters.describe()
        assert set(ops) <= {"array_contains", "==", ">=", "<"}, filters.describe()
    assert seen_ops == {"array_contains", "==", ">=", "<"}  # every kind of clause was exercised


def test_every_filter_combination_the_firestore_index_accepts_has_its_composite_vector_index():
    from shared.adapters.gcp.firestore_index import CHUNKS, EMBEDDING_FIELD, prefilter_index

    declared = {name: tuple(tuple(pair) for pair in shape)
                for name, shape in _local("chunk_prefilter_indexes").items()}
    assert len(set(declared.values())) == len(declared), "two declared indexes have the same fields"
    needed, refused = set(), 0
    for filters in _accepted_filter_combinations():
        if filters.is_empty:
            continue  # the plain vector index (chunks_embedding) serves it
        try:
            shape = prefilter_index(filters)
        except ConfigError as exc:
            # refused before Firestore is asked, naming what was combined
            assert "where" in str(exc), exc
            refused += 1
            continue
        assert shape in declared.values(), f"{filters.describe()}: no composite vector index {shape}"
        needed.add(shape)
    assert refused == 2 * 4 * 3  # a chunk-field key, two keys, source and a key: per kind and date
    assert needed == set(declared.values()), f"declared but never sent: {set(declared.values()) - needed}"

    # Each declared shape becomes an index of those fields, then __name__, then the vector field.
    index = _resource("google_firestore_index", "chunks_embedding_filtered")
    assert index["for_each"] == "${local.chunk_prefilter_indexes}"
    assert index["collection"] == CHUNKS
    dynamic = index["dynamic"][0]["fields"]
    assert dynamic["for_each"] == "${each.value}"
    content = dynamic["content"][0]
    assert content["field_path"] == "${fields.value[0]}"
    assert content["order"] == '${fields.value[1] == "CONTAINS" ? null : fields.value[1]}'
    assert content["array_config"] == '${fields.value[1] == "CONTAINS" ? "CONTAINS" : null}'
    fields = index["fields"]
    assert [f["field_path"] for f in fields] == ["__name__", EMBEDDING_FIELD]
    assert fields[-1]["vector_config"][0]["dimension"] == "${var.embedding_dimension}"
