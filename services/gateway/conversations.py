"""``GET /v1/conversations/{conversation_id}``: the turns of a conversation, oldest first.

A conversation is started by a question sent without ``conversation_id`` (``POST /v1/queries``,
MCP ``ask``, ``ragbus chat``) and continued by sending the id it returned; each turn is one
query, whose record holds the question as typed and the standalone question it was read as.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.contract.deps import Deps
from shared.query import api


class Conversations:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def routes(self) -> list[Route]:
        return [Route("/v1/conversations/{conversation_id}", self.read, methods=["GET"])]

    async def read(self, request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        try:
            found = await anyio.to_thread.run_sync(api.get_conversation, self.deps, conversation_id)
        except api.ConversationNotFound:
            return JSONResponse({"error": unknown_conversation(conversation_id)}, status_code=404)
        return JSONResponse(found)


def unknown_conversation(conversation_id: str) -> str:
    return (f"no conversation with id {conversation_id[:100]!r} (it may have expired with its queries); "
            "start one by sending a question without conversation_id")


class Turn(BaseModel):
    """One question of the conversation and how it ended."""

    query_id: str
    question: str = Field(description="The question as typed.")
    standalone_question: str | None = Field(
        description="The question as it was retrieved and graded: the follow-up rewritten to stand alone.")
    status: str
    outcome: str | None
    answer: str | None
    citations: list[dict[str, Any]]
    created_at: str


class Conversation(BaseModel):
    conversation_id: str
    turns: list[Turn] = Field(description="Oldest first.")


def openapi_fragment() -> dict[str, Any]:
    """The path and schemas of this module for the gateway's OpenAPI document."""
    ref = "#/components/schemas/{model}"
    schema = Conversation.model_json_schema(ref_template=ref)
    schemas: dict[str, Any] = {**schema.pop("$defs", {}), "Conversation": schema}
    return {"schemas": schemas, "paths": {"/v1/conversations/{conversation_id}": {"get": {
        "operationId": "readConversation",
        "summary": "The turns of a conversation, oldest first",
        "parameters": [{"name": "conversation_id", "in": "path", "required": True, "schema": {"type": "string"},
                        "description": "The conversation_id a question returned."}],
        "responses": {
            "200": {"description": "The conversation", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Conversation"}}}},
            "404": {"description": "No such conversation", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}},
        },
    }}}}
