"""The OpenAI-compatible endpoint's own rules, without a server: OpenAI messages read as a question
and its history, the answer written as content with Markdown sources, arguments refused by name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.gateway.openai_compat import (
    ChatCompletionRequest,
    ChatError,
    _refused_arguments,
    _validation_error,
    content_of,
    conversation,
    count_tokens,
    pieces,
    strip_sources,
)
from shared.query.record import QueryRecord


def _messages(*pairs):
    return ChatCompletionRequest.model_validate(
        {"model": "ragbus", "messages": [{"role": r, "content": c} for r, c in pairs]}).messages


def test_the_last_user_message_is_the_question_and_earlier_turns_the_history():
    question, index, history = conversation(_messages(
        ("system", "You are a helpful assistant."),
        ("assistant", "Hello! Ask me anything."),  # a greeting before any question is no turn
        ("user", "What is the ack deadline in Pub/Sub?"),
        ("assistant", "It is 10 seconds by default [1].\n\nSources:\n1. [Pub/Sub](https://example.org/ps)"),
        ("user", "   "),  # an empty message is no turn either
        ("user", "Does it apply to push?"),
        ("user", "And what is its maximum?"),
        ("system", "Answer briefly."),
    ))
    assert (question, index) == ("And what is its maximum?", 6)
    assert history == [
        {"question": "What is the ack deadline in Pub/Sub?", "answer": "It is 10 seconds by default [1]."},
        {"question": "Does it apply to push?", "answer": ""},
    ]


def test_text_parts_are_joined_and_other_parts_refused():
    (message,) = _messages(("user", [{"type": "text", "text": "What is"}, {"type": "text", "text": "BM25?"}]))
    assert conversation([message])[0] == "What is\nBM25?"
    (image,) = _messages(("user", [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]))
    with pytest.raises(ChatError) as refused:
        conversation([image])
    assert (refused.value.status, refused.value.param) == (400, "messages[0].content[0]")
    assert "is an 'image_url' part; ragbus reads text only" in refused.value.message
    (audio,) = _messages(("user", [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]))
    with pytest.raises(ChatError) as refused:
        conversation([audio])
    assert "is an 'input_audio' part" in refused.value.message
    (file_part,) = _messages(("user", [{"type": "file", "file": {"file_id": "f"}}]))
    with pytest.raises(ChatError) as refused:
        conversation([file_part])
    assert "is a 'file' part" in refused.value.message
    (textless,) = _messages(("user", [{"type": "text"}]))
    with pytest.raises(ChatError) as refused:
        conversation([textless])  # it was told "is a 'text' part; ragbus reads text only"
    assert refused.value.param == "messages[0].content[0].text"
    assert refused.value.message == ("messages[0].content[0] is a text part without 'text'; "
                                     'send {"type": "text", "text": "..."}')


def test_a_control_character_in_any_message_is_refused_naming_the_message():
    with pytest.raises(ChatError) as refused:
        conversation(_messages(("user", "What is BM25?"), ("assistant", "\x1b[31mred\x1b[0m"), ("user", "and?")))
    assert refused.value.param == "messages[1].content" and "U+001B at position 0" in refused.value.message
    with pytest.raises(ChatError) as refused:  # a lone surrogate (JSON's "\\ud800") is no control character
        conversation(_messages(("user", "What is BM25?\ud800")))
    assert "contains an unpaired surrogate U+D800 at position 13" in refused.value.message
    assert conversation(_messages(("user", "tabs\tand\r\nnewlines are fine")))[0] == "tabs\tand\r\nnewlines are fine"


@pytest.mark.parametrize(("pairs", "param", "says"), [
    ((("system", "be nice"), ("assistant", "hi")), "messages", "the messages hold no user message"),
    ((("user", "what is bm25"), ("assistant", "It is")), "messages[1]", "assistant message after the last user"),
])
def test_a_conversation_without_a_question_to_answer_is_refused(pairs, param, says):
    with pytest.raises(ChatError) as refused:
        conversation(_messages(*pairs))
    assert (refused.value.status, refused.value.param) == (400, param) and says in refused.value.message


@pytest.mark.parametrize(("body", "param", "says"), [
    ({"model": "ragbus", "messages": [], "filters": {"sourse": "x"}}, "messages", "at least 1 item"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": "q"}] * 1001}, "messages",
     "messages has 1001 items, more than the limit of 1000; send the last turns only"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "temprature": 1}, "temprature",
     "unrecognized request argument 'temprature'"),
    ({"model": "ragbus", "messages": [{"role": "tool", "content": "q"}]}, "messages[0].role", "calls no tools"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": 5}]}, "messages[0].content", "got 5"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "stream": "yes"}, "stream", "boolean"),
    ({"messages": [{"role": "user", "content": "q"}]}, "model", "missing required argument 'model'"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": [{"type": "text", "text": True}]}]},
     "messages[0].content[0].text", "Input should be a valid string (got true)"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "stop": ["end", 7]}, "stop[1]", "got 7"),
    ({"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "filters": {"sourse": "x"}},
     "filters.sourse", "unknown filter 'sourse'"),
])
def test_validation_errors_are_one_line_naming_the_argument(body, param, says):
    with pytest.raises(ValidationError) as caught:
        ChatCompletionRequest.model_validate(body)
    error = _validation_error(caught.value)
    assert error.status == 400 and error.param == param and says in error.message and "\n" not in error.message


@pytest.mark.parametrize(("extra", "status", "param"), [
    ({"n": 2}, 400, "n"),
    ({"logprobs": True}, 400, "logprobs"),
    ({"modalities": ["text", "audio"]}, 400, "modalities"),
    ({"response_format": {"type": "json_object"}}, 400, "response_format"),
    ({"model": "gpt-4o"}, 404, "model"),
])
def test_arguments_ragbus_cannot_honour_are_refused_by_name(extra, status, param):
    req = ChatCompletionRequest.model_validate(
        {"model": "ragbus", "messages": [{"role": "user", "content": "q"}], **extra})
    with pytest.raises(ChatError) as refused:
        _refused_arguments(req)
    assert (refused.value.status, refused.value.param) == (status, param)


@pytest.mark.parametrize("extra", [{"model": "m" * 100_000}, {"response_format": {"type": "j" * 100_000}}])
def test_a_refused_value_is_quoted_back_cut_short(extra):
    req = ChatCompletionRequest.model_validate(
        {"model": "ragbus", "messages": [{"role": "user", "content": "q"}], **extra})
    with pytest.raises(ChatError) as refused:
        _refused_arguments(req)
    assert len(refused.value.message) < 300  # the whole value came back: a 100 kB error line


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "w" * 100_000, "content": "q"}]},
    {"messages": [{"role": "user", "content": "q"}], "k" * 100_000: 1},
    {"messages": [{"role": "user", "content": "q"}], "filters": {"k" * 100_000: "v"}},
])
def test_a_refused_argument_or_role_is_quoted_back_cut_short(body):
    with pytest.raises(ValidationError) as caught:
        ChatCompletionRequest.model_validate({"model": "ragbus", **body})
    refused = _validation_error(caught.value)
    assert len(refused.message) < 300 and len(refused.param) <= 80  # both came back whole (100 kB)


def test_a_refused_content_part_type_is_quoted_back_cut_short():
    (message,) = _messages(("user", [{"type": "t" * 100_000}]))
    with pytest.raises(ChatError) as refused:
        conversation([message])
    assert len(refused.value.message) < 300


@pytest.mark.parametrize(("extra", "param", "code", "says"), [
    ({"max_tokens": -1}, "max_tokens", "integer_below_min_value",
     "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got -1 instead."),
    ({"max_tokens": 0}, "max_tokens", "integer_below_min_value", "Expected a value >= 1, but got 0 instead."),
    ({"max_completion_tokens": -5}, "max_completion_tokens", "integer_below_min_value", "got -5 instead"),
    ({"max_tokens": 2.0}, "max_tokens", "invalid_type",
     "Invalid type for 'max_tokens': expected an integer, but got a decimal instead."),
    ({"max_tokens": True}, "max_tokens", "invalid_type", "expected an integer, but got a boolean instead"),
    ({"max_tokens": "100"}, "max_tokens", "invalid_type", "but got a string instead"),
    ({"max_tokens": 10**30}, "max_tokens", "integer_above_max_value", "Expected a value <= 9223372036854775807"),
    ({"temperature": 2.5}, "temperature", "decimal_above_max_value",
     "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 2.5 instead."),
    ({"temperature": -0.1}, "temperature", "decimal_below_min_value", "Expected a value >= 0, but got -0.1"),
    ({"temperature": float("nan")}, "temperature", "invalid_value", "expected a finite number, but got NaN"),
    ({"temperature": False}, "temperature", "invalid_type", "expected a number, but got a boolean instead"),
    ({"top_p": 1.5}, "top_p", "decimal_above_max_value", "Expected a value <= 1"),
    ({"frequency_penalty": -3}, "frequency_penalty", "decimal_below_min_value", "Expected a value >= -2"),
    ({"presence_penalty": float("inf")}, "presence_penalty", "invalid_value", "got Infinity instead"),
    ({"n": 0}, "n", "integer_below_min_value", "Expected a value >= 1, but got 0 instead."),
    ({"n": True}, "n", "invalid_type", "but got a boolean instead"),
    ({"top_logprobs": 21}, "top_logprobs", "integer_above_max_value", "Expected a value <= 20"),
    ({"seed": 1.5}, "seed", "invalid_type", "expected an integer, but got a decimal"),
    ({"seed": -(2**63) - 1}, "seed", "integer_below_min_value", "Expected a value >= -9223372036854775808"),
    ({"logit_bias": {"50256": -101}}, "logit_bias.50256", "integer_below_min_value", "Expected a value >= -100"),
])
def test_numeric_arguments_are_held_to_openais_types_and_ranges_in_its_words(extra, param, code, says):
    # max_tokens: -1 was accepted (ignored, as every sampling argument is); OpenAI answers it 400
    # invalid_request_error naming the parameter, and so does ragbus, in the same words and code
    with pytest.raises(ValidationError) as caught:
        ChatCompletionRequest.model_validate({"model": "ragbus", "messages": [{"role": "user", "content": "q"}],
                                              **extra})
    error = _validation_error(caught.value)
    assert (error.status, error.param, error.code) == (400, param, code) and says in error.message, error.message


def test_a_tool_choice_that_is_neither_a_name_nor_an_object_is_quoted_as_sent():
    req = ChatCompletionRequest.model_validate(
        {"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "tool_choice": True})
    with pytest.raises(ChatError) as refused:
        _refused_arguments(req)
    assert refused.value.message.startswith("tool_choice true is not available")  # it said 'function'


def test_numeric_arguments_at_their_bounds_are_accepted():
    _refused_arguments(ChatCompletionRequest.model_validate(
        {"model": "ragbus", "messages": [{"role": "user", "content": "q"}], "max_tokens": 1,
         "max_completion_tokens": 2**63 - 1, "temperature": 0, "top_p": 1, "frequency_penalty": -2,
         "presence_penalty": 2.0, "n": 1, "top_logprobs": 0, "seed": -(2**63), "logit_bias": {"7": 100}}))


def test_sampling_arguments_are_accepted():
    req = ChatCompletionRequest.model_validate(
        {"model": "ragbus-quick", "messages": [{"role": "user", "content": "q"}], "temperature": 0.2,
         "max_tokens": 50, "top_p": 1, "n": 1, "stream_options": {"include_usage": True}, "user": "u1",
         "response_format": {"type": "text"}})
    _refused_arguments(req)


def _record(answer: str, citations: list[dict]) -> QueryRecord:
    record = QueryRecord.from_doc({"id": "q1", "status": "answered", "outcome": "answered",
                                   "original_query": "q", "current_query": "q"})
    record.answer = answer
    record.citations = citations
    return record


def test_the_content_ends_with_numbered_markdown_links_to_the_sources():
    record = _record("BM25 saturates term frequency [1]. A script URL was cited [2]", [
        {"id": 1, "title": "Okapi [BM25]\nexplained", "url": "https://example.org/a_(b)", "document_id": "d1",
         "chunk_id": "c1"},
        {"id": 2, "title": "A page with a script URL", "url": "javascript:alert(1)", "document_id": "d2",
         "chunk_id": "c2"},
    ])
    content = content_of(record)
    assert content.endswith("\n\nSources:\n1. [Okapi \\[BM25\\] explained](https://example.org/a_%28b%29)\n"
                            "2. A page with a script URL")
    # a quoted image never reaches it: the synthesizer stores the answer plain (tests/hostile/test_answer_markup.py)
    assert strip_sources(content) == content.split("\n\nSources:")[0]
    assert content_of(_record("The documents do not say.", [])) == "The documents do not say."
    # a backslash in the address would escape the link's closing ")" and break it
    slash = _record("It is 5 [1].", [{"id": 1, "title": "T", "url": "https://e.example/a\\", "document_id": "d",
                                      "chunk_id": "c"}])
    assert content_of(slash).endswith("\n1. [T](https://e.example/a%5C)")


def test_an_address_in_a_title_that_is_not_linked_is_set_in_a_code_span():
    # as in the answer (shared/query/plain_answer.py): a chat client's renderer would link a bare address
    title = "Notes_ http://127.0.0.1:9/phish?a=*b* and www.h.example/x, `http://h/y` <key>"
    record = _record("The port is 5151 [1].", [{"id": 1, "title": title, "url": "file:///srv/notes.txt",
                                                 "document_id": "d1", "chunk_id": "c1"}])
    assert content_of(record).endswith("\n1. Notes\\_ `http://127.0.0.1:9/phish?a=*b*` and `www.h.example/x`, "
                                       "\\``http://h/y`\\` \\<key\\>")


def test_pieces_join_to_the_text_and_cut_after_whitespace():
    text = "Reciprocal rank fusion adds 1/(k + rank) over the lists [1].\n\nSources:\n1. [RRF](https://e.org/r)"
    cut = pieces(text, size=16)
    assert "".join(cut) == text and len(cut) > 3
    # after whitespace, or at the size when a word is longer than that
    assert all(p[-1] in " \n" or len(p) == 16 for p in cut[:-1]) and "[RRF](https://e." in cut
    assert pieces("x" * 40, size=16) == ["x" * 16, "x" * 16, "x" * 8]
    assert pieces("") == []


def test_tokens_are_counted_as_words_and_punctuation():
    assert count_tokens("What is BM25? It's a ranking function.") == 11  # It ' s
    assert count_tokens("") == 0


def test_every_argument_of_the_openai_sdk_is_known():
    # "any chat client or SDK works unchanged": `functions` (older clients' tools), `prediction` (editors) and
    # `prompt_cache_retention` were answered 400 "unrecognized request argument"; known, each is ignored or refused
    # by name. Read from the installed SDK, so a new argument of a new release shows up here.
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    sdk = set(CompletionCreateParamsBase.__annotations__)
    assert sdk - set(ChatCompletionRequest.model_fields) == set()
    for name in ("functions", "function_call", "prediction", "prompt_cache_retention", "web_search_options"):
        assert name in ChatCompletionRequest.model_fields
    request = ChatCompletionRequest.model_validate({
        "model": "ragbus", "messages": [{"role": "user", "content": "What is BM25?"}],
        "functions": [{"name": "f", "parameters": {}}], "function_call": "auto",
        "prediction": {"type": "content", "content": "BM25 is"}, "prompt_cache_retention": "24h",
        "prompt_cache_options": {"ttl": "24h"}, "moderation": None, "web_search_options": {}})
    assert _refused_arguments(request) is None
    named = ChatCompletionRequest.model_validate({
        "model": "ragbus", "messages": [{"role": "user", "content": "What is BM25?"}], "function_call": {"name": "f"}})
    with pytest.raises(ChatError) as refused:  # as a named tool_choice is: ragbus calls no functions
        _refused_arguments(named)
    assert refused.value.param == "function_call"
