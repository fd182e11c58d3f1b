"""Whether a process can do the work of the stages it runs, known before the first message arrives.

A stage that cannot work with this configuration would otherwise take every message
and fail each one while its process reports ready: the local grader with a missing,
stale (other feature version or feature list) or hostile ``grade_model.json`` fails
every question it grades. Each :class:`~shared.runtime.stages.Stage` names the checks
it needs (``Stage.needs``); a check reads the settings and returns the one-line reason
it fails, or None. A check decides itself whether it applies: the grade model matters
only to the local provider (``RAGBUS_LLM=local``), never to Gemini or an
OpenAI-compatible server; a served model's location and retry budget only to those
(:func:`served_model`); the Google embedder's only to the gcp runtime (:func:`embedder`).

Where they run: the embedded runtime's commands before they start the stages
(``ragbus ask``, ``demo`` and ``eval`` refuse to start, ``ragbus serve`` says so and its
``/readyz`` answers 503), a Cloud Function when it starts
(:func:`shared.runtime.functions.check_function_at_start`), and the gateway's
``/readyz`` for the stages its own process runs. A process that runs none of the
stages that need a check (the feed poller and cleaner; a gateway whose stages run
elsewhere) is never stopped by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from shared.contract.config import Settings
from shared.contract.errors import ConfigError
from shared.contract.providers import PROVIDER_BY_NAME
from shared.runtime.stages import STAGE_BY_NAME

Check = Callable[[Settings], str | None]


def grade_model(settings: Settings) -> str | None:
    """The local grader's fitted model (``grade_model.json``), the local reader's verdict model
    (``verdict_model.json``, which the grader reads too) and its sentence score (``sentence_score.json``) load
    and match the features they measure.

    The reason is :func:`~shared.adapters.local.grade_model.shipped_model`'s (or
    :func:`~shared.query.reading.verdict.shipped_verdict_model`'s, or
    :func:`~shared.query.reading.sentence_score.shipped_sentence_score`'s) own error,
    which names the file and the way to refit. A model that loaded is kept for the
    process; a failure is not, so a refit file is seen by the next check.
    """
    if settings.llm_provider != "local":
        return None
    from shared.adapters.local.grade_model import shipped_model
    from shared.query.reading.sentence_score import shipped_sentence_score
    from shared.query.reading.verdict import shipped_verdict_model

    try:
        shipped_model()
        shipped_verdict_model()
        shipped_sentence_score()
    except ConfigError as exc:
        return str(exc)
    return None


def served_model(settings: Settings) -> str | None:
    """A served model's settings (``RAGBUS_LLM``: its adapter's ``check_settings``), e.g. Gemini's Vertex location serves
    the model, and in the gcp runtime every attempt of a call ends before the function's timeout.
    Offline: no client is built, nothing is called."""
    try:
        PROVIDER_BY_NAME[settings.llm_provider].check_settings(settings)
    except ConfigError as exc:
        return str(exc)
    return None


def embedder(settings: Settings) -> str | None:
    """The gcp runtime's Google embedder (``RAGBUS_EMBEDDER=genai``): its model, location and retry budget."""
    if settings.runtime != "gcp" or settings.embedder != "genai":
        return None
    from shared.adapters.gcp.genai_embedder import GenAiEmbedder

    try:
        GenAiEmbedder.check_settings(settings)
    except ConfigError as exc:
        return str(exc)
    return None


CHECKS: dict[str, Check] = {"grade_model": grade_model, "served_model": served_model, "embedder": embedder}


def unready_stages(settings: Settings, stages: Iterable[str]) -> dict[str, str]:
    """Each of ``stages`` that cannot do its work with ``settings``, with the reason (empty: all ready)."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(stages):
        stage = STAGE_BY_NAME.get(name)
        if stage is None:
            raise ValueError(f"unknown stage {name!r}; the stages are {', '.join(STAGE_BY_NAME)}")
        for check in stage.needs:
            reason = CHECKS[check](settings)
            if reason:
                out[name] = reason
                break
    return out


def require_ready(settings: Settings, stages: Iterable[str]) -> None:
    """:class:`ConfigError` with the reason (the check's own message) when any of ``stages`` is not ready."""
    unready = unready_stages(settings, stages)
    if unready:
        raise ConfigError("; ".join(dict.fromkeys(unready.values())))
