"""The OpenAPI 3.1 description of the gateway's HTTP API.

Written by hand next to the routes (rather than generated) so that it says what
the record *means*; a test checks each documented response against what the
gateway really sends.
"""

from __future__ import annotations

from typing import Any

from services.gateway import conversations, openai_compat
from shared.contract.config import Settings
from shared.contract.sources import SOURCE_KINDS
from shared.query.api import MAX_ITERATIONS_RANGE, TOP_K_RANGE

_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def _json(description: str, schema_name: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}},
        **extra,
    }


_LETTER_ID = {
    "name": "letter_id",
    "in": "path",
    "required": True,
    "description": "The dead letter's id, or a unique prefix of its message id (as `ragbus dead-letters` shows).",
    "schema": {"type": "string", "minLength": 1},
}

_QUERY_ID = {
    "name": "query_id",
    "in": "path",
    "required": True,
    "description": "The id returned when the query was submitted.",
    "schema": {"type": "string"},
}


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The document served at ``/openapi.json``; limits come from ``settings``."""
    nullable_str = {"type": ["string", "null"]}
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {"type": "string", "description": "What was wrong and what to send instead."}
            },
        },
        "Redrive": {
            "type": "object",
            "description": "retried or purged: the dead letters handled; refused: those that could not be.",
            "properties": {
                "retried": {"type": "array", "items": {"type": "string"}},
                "purged": {"type": "array", "items": {"type": "string"}},
                "refused": {"type": "array", "items": {"type": "object", "required": ["id", "error"], "properties": {
                    "id": {"type": "string"}, "error": {"type": "string"}}}},
            },
        },
        "QueryRequest": {
            "type": "object",
            "anyOf": [{"required": ["question"]}, {"required": ["query"]}],
            "not": {"required": ["question", "query"]},
            "additionalProperties": False,
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": settings.max_query_chars,
                    "description": "The question. Plain text: control characters other than tab "
                    "and newline are refused.",
                },
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": settings.max_query_chars,
                    "deprecated": True,
                    "description": "The old name of `question`, accepted for one more release.",
                },
                "top_k": {
                    "type": "integer",
                    "minimum": TOP_K_RANGE[0],
                    "maximum": TOP_K_RANGE[1],
                    "default": settings.top_k,
                    "description": "How many contexts to retrieve per iteration.",
                },
                "max_iterations": {
                    "type": "integer",
                    "minimum": MAX_ITERATIONS_RANGE[0],
                    "maximum": MAX_ITERATIONS_RANGE[1],
                    "default": settings.max_iterations,
                    "description": "How many refinements the loop may make after the first try.",
                },
                "wait_s": {
                    "type": "number",
                    "minimum": 0,
                    "default": 0,
                    "description": "Seconds to wait for the answer before replying 202; values "
                    "above 60 are treated as 60.",
                },
                "filters": {"$ref": "#/components/schemas/Filters"},
                "conversation_id": {
                    "type": "string",
                    "description": "Continue this conversation (the id an earlier question returned): "
                    "the question is read in the light of its earlier turns. Leave it out to start one.",
                },
            },
        },
        "Filters": {
            "type": "object",
            "additionalProperties": False,
            "description": "Which documents every search of the query may return, decided before ranking; "
            "all conditions must hold. Relative times are resolved when the query is submitted.",
            "properties": {
                "source": {"type": "string", "description": "A feed or sitemap URL, gs://bucket/prefix or a "
                           "folder the documents came from (a prefix)."},
                "since": {"type": "string", "description": "Published at or after: a date (2025-06-01), an "
                          "ISO 8601 time or an age (12h, 7d, 2w, 3m, 1y)."},
                "until": {"type": "string", "description": "Published before: a date (through that day), an "
                          "ISO 8601 time or an age."},
                "kind": {"type": "string", "enum": list(SOURCE_KINDS)},
                "where": {"type": "object", "additionalProperties": {"type": "string"},
                          "description": "Metadata key: value pairs that must all be equal."},
            },
        },
        "QueryAccepted": {
            "type": "object",
            "required": ["id", "status", "status_url", "events_url"],
            "properties": {
                "id": {"type": "string"},
                "status": {"$ref": "#/components/schemas/Status"},
                "status_url": {"type": "string", "description": "GET it for the record."},
                "events_url": {"type": "string", "description": "Server-Sent Events of its stages."},
            },
        },
        "Status": {"enum": ["pending", "running", "answered", "failed", "timed_out"]},
        "Outcome": {
            "enum": [
                None,
                "answered",
                "answered_with_caveat",
                "not_answerable",
                "failed",
                "timed_out",
            ]
        },
        "Grade": {
            "type": "object",
            "description": "How well an iteration's contexts answer the query (0..1 scores).",
            "properties": {
                "score": {"type": "number"},
                "relevance": {"type": "number"},
                "completeness": {"type": "number"},
                "grounded": {"type": "boolean"},
                "answerable": {"type": "boolean"},
                "reasoning": {"type": "string"},
                "missing_aspects": {"type": "array", "items": {"type": "string"}},
            },
        },
        "Context": {
            "type": "object",
            "description": "A retrieved chunk as the iteration saw it.",
            "properties": {
                "chunk_id": {"type": "string"},
                "document_id": {"type": "string"},
                "title": {"type": "string"},
                "url": {"type": "string"},
                "text": {"type": "string"},
                "score": {"type": "number"},
            },
        },
        "Iteration": {
            "type": "object",
            "required": ["iteration"],
            "properties": {
                "iteration": {"type": "integer", "minimum": 0},
                "query": {"type": "string", "description": "The (rewritten) query retrieved with."},
                "sub_queries": {"type": "array", "items": {"type": "string"}},
                "contexts": {"type": "array", "items": {"$ref": "#/components/schemas/Context"}},
                "grade": {
                    "oneOf": [{"$ref": "#/components/schemas/Grade"}, {"type": "null"}]
                },
                "decision": {
                    "type": ["string", "null"],
                    "description": "refine, accept, abstain or exhausted.",
                },
                "timings": {
                    "type": "object",
                    "additionalProperties": {"type": "number"},
                    "description": "Milliseconds spent per stage.",
                },
            },
        },
        "Citation": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {
                    "type": ["integer", "string"],
                    "description": "The number the answer cites as [n].",
                },
                "title": {"type": "string"},
                "url": {"type": "string"},
                "document_id": {"type": "string"},
                "chunk_id": {"type": "string", "description": "The first chunk cited under this number."},
                "chunk_ids": {
                    "type": "array", "items": {"type": "string"},
                    "description": "Every chunk of this source the answer cites: chunks of one document "
                                   "(or one URL) share one number.",
                },
            },
        },
        "Event": {
            "type": "object",
            "required": ["stage", "type", "at"],
            "properties": {
                "stage": {"type": "string"},
                "type": {"type": "string"},
                "at": {"type": "string", "format": "date-time"},
                "iteration": {"type": ["integer", "null"]},
                "detail": {},
            },
        },
        "QueryRecord": {
            "type": "object",
            "required": [
                "id",
                "status",
                "outcome",
                "original_query",
                "iterations",
                "citations",
                "events",
                "created_at",
                "deadline",
            ],
            "properties": {
                "id": {"type": "string"},
                "status": {"$ref": "#/components/schemas/Status"},
                "outcome": {"$ref": "#/components/schemas/Outcome"},
                "original_query": {"type": "string"},
                "current_query": {"type": "string"},
                "iteration": {"type": "integer"},
                "top_k": {"type": "integer"},
                "max_iterations": {"type": "integer"},
                "model_calls": {"type": "integer"},
                "max_model_calls": {"type": "integer"},
                "created_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"},
                "deadline": {"type": "string", "format": "date-time"},
                "iterations": {"type": "array", "items": {"$ref": "#/components/schemas/Iteration"}},
                "best_iteration": {"type": ["integer", "null"]},
                "answer": nullable_str,
                "citations": {"type": "array", "items": {"$ref": "#/components/schemas/Citation"}},
                "trace_id": nullable_str,
                "filters": {"$ref": "#/components/schemas/Filters"},
                "time_filter": {
                    "type": "object",
                    "description": "The question's time words read as a published-date range (issue 27; "
                                   "absent when it names no time or the caller gave a date range), and each "
                                   "step the retriever widened it by when it held nothing on the question's topic.",
                    "required": ["phrase", "since", "until", "newest", "window_days", "widened"],
                    "properties": {
                        "phrase": {"type": "string"},
                        "since": {"type": ["string", "null"], "format": "date-time"},
                        "until": {"type": ["string", "null"], "format": "date-time"},
                        "newest": {"type": "boolean"},
                        "window_days": {"type": ["integer", "null"]},
                        "widened": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "error": nullable_str,
                "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
                "fallbacks": {
                    "type": "array",
                    "description": "Each stage result made without the model (a transient model failure, "
                                   "an unusable reply or a spent model-call budget), and why.",
                    "items": {"type": "object", "required": ["stage", "iteration", "reason"],
                              "properties": {"stage": {"type": "string"}, "iteration": {"type": "integer"},
                                             "reason": {"type": "string"}}},
                },
            },
        },
        "SearchResult": {
            "type": "object",
            "required": ["rank", "score", "text", "document_id", "chunk_id", "title", "url"],
            "properties": {
                "rank": {"type": "integer", "minimum": 1},
                "score": {"type": "number"},
                "text": {"type": "string"},
                "document_id": {"type": "string"},
                "chunk_id": {"type": "string"},
                "title": {"type": "string"},
                "url": {"type": "string"},
                "published": nullable_str,
            },
        },
        "SearchResponse": {
            "type": "object",
            "required": ["query", "k", "results"],
            "properties": {
                "query": {"type": "string"},
                "k": {"type": "integer"},
                "results": {"type": "array", "items": {"$ref": "#/components/schemas/SearchResult"}},
            },
        },
        "Health": {
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"const": "ok"}, "runtime": {"type": "string"},
                           "model": {"$ref": "#/components/schemas/ModelHealth"},
                           "stages": {"$ref": "#/components/schemas/UnreadyStages"}},
        },
        "UnreadyStages": {
            "type": "object",
            "description": "Each stage this gateway's process runs (ragbus serve) that cannot do its work, "
                           "with the reason (e.g. the local grader's model file is missing or was fit on other "
                           "features, and how to refit it). Absent when every stage is ready.",
            "additionalProperties": {"type": "string"},
        },
        "ModelHealth": {
            "type": "object",
            "description": "Whether the configured model answers; after the model API refused a stage "
                           "(unknown or retired model, invalid argument, no permission) it is unusable "
                           "with the HTTP status and the reason.",
            "required": ["model", "usable"],
            "properties": {"model": {"type": ["string", "null"]}, "usable": {"type": "boolean"},
                           "status": {"type": "integer"}, "reason": {"type": "string"},
                           "stage": {"type": "string"}, "at": {"type": "string"},
                           "trace_id": {"type": ["string", "null"]}},
        },
        "Readiness": {
            "type": "object",
            "required": ["status", "model"],
            "properties": {"status": {"enum": ["ready", "unready"]},
                           "model": {"$ref": "#/components/schemas/ModelHealth"},
                           "stages": {"$ref": "#/components/schemas/UnreadyStages"}},
        },
    }
    paths: dict[str, Any] = {
        "/v1/queries": {
            "post": {
                "operationId": "submitQuery",
                "summary": "Ask a question",
                "description": "Creates the query and starts the loop. Replies 200 with the "
                "finished record when it ends within wait_s, else 202 with where to follow it.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/QueryRequest"}}
                    },
                },
                "responses": {
                    "200": _json("The query ended within wait_s.", "QueryRecord"),
                    "202": _json(
                        "The query is running.",
                        "QueryAccepted",
                        headers={
                            "Location": {
                                "description": "The status URL.",
                                "schema": {"type": "string"},
                            }
                        },
                    ),
                    "400": _error("The body or one of its fields is invalid."),
                    "413": _error("The body is too large."),
                    "503": _error("The bus did not accept the query (retry shortly), or a stage this process "
                                  "runs cannot work with its configuration (see GET /readyz)."),
                },
            }
        },
        "/v1/queries/{query_id}": {
            "get": {
                "operationId": "getQuery",
                "summary": "The query's record",
                "parameters": [_QUERY_ID],
                "responses": {
                    "200": _json("The record as it stands.", "QueryRecord"),
                    "404": _error("No query has this id."),
                },
            }
        },
        "/v1/queries/{query_id}/events": {
            "get": {
                "operationId": "streamQueryEvents",
                "summary": "Server-Sent Events of the query's stages",
                "description": "One SSE event per record event, in order, named by its stage "
                "(else its type), with the event as JSON data and its index as the SSE id "
                "(send Last-Event-ID to resume). The stream ends with an `end` event whose data "
                "is the record: final when the query ended, as it stands when timeout_s passed.",
                "parameters": [
                    _QUERY_ID,
                    {
                        "name": "timeout_s",
                        "in": "query",
                        "required": False,
                        "description": "Longest the stream stays open (default: the query "
                        "timeout plus 30 s; at most 600).",
                        "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "An event stream.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "400": _error("timeout_s or Last-Event-ID is invalid."),
                    "404": _error("No query has this id."),
                },
            }
        },
        "/v1/queries/{query_id}/trace": {
            "get": {
                "operationId": "getQueryTrace",
                "summary": "The query's trace as a waterfall (local span store; Cloud Trace on Google Cloud)",
                "description": "Every span of the query's one trace, depth-first, with its depth, offset "
                "from the first span and duration; the label carries iteration, grades and decision.",
                "parameters": [_QUERY_ID],
                "responses": {
                    "200": {
                        "description": "The waterfall.",
                        "content": {"application/json": {"schema": {
                            "type": "object",
                            "required": ["trace_id", "duration_ms", "rows"],
                            "properties": {
                                "trace_id": {"type": ["string", "null"]},
                                "note": {"type": "string"},
                                "console_url": {"type": "string"},
                                "duration_ms": {"type": "number"},
                                "rows": {"type": "array", "items": {
                                    "type": "object",
                                    "required": ["span_id", "depth", "name", "label", "status",
                                                 "offset_ms", "duration_ms"],
                                    "properties": {
                                        "span_id": {"type": "string"},
                                        "parent_id": {"type": ["string", "null"]},
                                        "depth": {"type": "integer", "minimum": 0},
                                        "name": {"type": "string"},
                                        "label": {"type": "string"},
                                        "status": {"type": "string"},
                                        "offset_ms": {"type": "number"},
                                        "duration_ms": {"type": "number"},
                                    },
                                }},
                            },
                        }}},
                    },
                    "404": _error("No query has this id."),
                },
            }
        },
        "/v1/search": {
            "get": {
                "operationId": "searchDocuments",
                "summary": "Retrieval only: the chunks nearest the words",
                "parameters": [
                    {
                        "name": "q",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1, "maxLength": settings.max_query_chars},
                    },
                    {
                        "name": "k",
                        "in": "query",
                        "required": False,
                        "schema": {
                            "type": "integer",
                            "minimum": TOP_K_RANGE[0],
                            "maximum": TOP_K_RANGE[1],
                            "default": settings.top_k,
                        },
                    },
                    *[
                        {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
                         "description": text}
                        for name, text in (
                            ("source", "Only documents from this feed/sitemap URL, gs://bucket/prefix or folder."),
                            ("since", "Only documents published since (a date, an ISO time or an age: 7d)."),
                            ("until", "Only documents published before (a date, an ISO time or an age)."),
                            ("kind", f"Only documents that came in as {', '.join(SOURCE_KINDS[:-1])} or {SOURCE_KINDS[-1]}."),
                        )
                    ],
                    {"name": "where", "in": "query", "required": False, "style": "form", "explode": True,
                     "schema": {"type": "array", "items": {"type": "string", "pattern": "^[^=]+=.+$"}},
                     "description": "key=value on the documents' metadata; repeat for more (all must hold)."},
                ],
                "responses": {
                    "200": _json("Chunks, best first.", "SearchResponse"),
                    "400": _error("q or k is invalid."),
                    "503": _error("Retrieval is unavailable right now."),
                },
            }
        },
        "/v1/dead-letters": {
            "get": {
                "operationId": "listDeadLetters",
                "summary": "Messages that could not be handled, with the reason",
                "responses": {"200": {"description": "Every dead letter, oldest first.", "content": {
                    "application/json": {"schema": {"type": "object", "properties": {
                        "dead_letters": {"type": "array", "items": {"type": "object"}}}}}}}},
            },
            "delete": {
                "operationId": "purgeDeadLetters",
                "summary": "Purge every dead letter (a document it was about is left out until it changes)",
                "responses": {"200": _json("What was purged.", "Redrive")},
            },
        },
        "/v1/dead-letters/retry": {
            "post": {
                "operationId": "retryDeadLetters",
                "summary": "Publish every dead letter's message again (after fixing the cause)",
                "responses": {"200": _json("What was retried, and what could not be.", "Redrive")},
            }
        },
        "/v1/dead-letters/{letter_id}": {
            "delete": {
                "operationId": "purgeDeadLetter",
                "summary": "Purge one dead letter",
                "parameters": [_LETTER_ID],
                "responses": {"200": _json("Purged.", "Redrive"),
                              "404": _error("No dead letter has this id (or several start with it).")},
            }
        },
        "/v1/dead-letters/{letter_id}/retry": {
            "post": {
                "operationId": "retryDeadLetter",
                "summary": "Publish one dead letter's message again (after fixing the cause)",
                "parameters": [_LETTER_ID],
                "responses": {"200": _json("Retried.", "Redrive"),
                              "404": _error("No dead letter has this id (or several start with it)."),
                              "409": _json("Its message cannot be published again (see refused).", "Redrive")},
            }
        },
        "/healthz": {
            "get": {
                "operationId": "health",
                "summary": "Liveness",
                "responses": {"200": _json("The gateway is up (with ``model`` when the model is unusable).",
                                           "Health")},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readiness",
                "summary": "Readiness: can queries be answered by the configured model and the stages "
                           "this process runs?",
                "responses": {"200": _json("The model is usable and every stage here is ready.", "Readiness"),
                              "503": _json("The model API refused a stage (see model.reason), or a stage this "
                                           "process runs cannot work (see stages).", "Readiness")},
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }
    for fragment in (conversations.openapi_fragment(), openai_compat.openapi_fragment()):
        schemas.update(fragment["schemas"])
        paths.update(fragment["paths"])
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ragbus gateway",
            "version": "0.1.0",
            "description": "Ask questions answered from indexed documents with citations, follow "
            "the query loop live, or search the index. The MCP endpoint (streamable HTTP) is at "
            "/mcp with the tools search_documents and ask; the web page is at /.",
        },
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "paths": paths,
        "components": {"schemas": schemas},
    }
