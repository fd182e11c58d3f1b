"""Vertex AI Vector Search over its REST API (v1), without google-cloud-aiplatform.

Three calls, in the shapes of the v1 reference (IndexService and MatchService):

- ``POST https://{region}-aiplatform.googleapis.com/v1/{index}:upsertDatapoints``
  ``{"datapoints": [IndexDatapoint]}``, where an IndexDatapoint is ``{"datapointId",
  "featureVector": [float], "sparseEmbedding": {"values": [float], "dimensions": [int64]},
  "restricts": [{"namespace", "allowList": [..]}], "numericRestricts": [{"namespace", "valueInt"}]}``;
- ``POST .../v1/{index}:removeDatapoints`` ``{"datapointIds": [..]}``;
- ``POST https://{publicEndpointDomainName}/v1/{indexEndpoint}:findNeighbors``
  ``{"deployedIndexId", "queries": [{"datapoint": IndexDatapoint, "neighborCount", "rrf": {"alpha"}}]}``
  answered by ``{"nearestNeighbors": [{"id", "neighbors": [{"datapoint": {"datapointId"},
  "distance", "sparseDistance"}]}]}``. A query with both a dense and a sparse embedding is a
  hybrid query; ``rrf.alpha`` weighs dense against sparse in the reciprocal-rank fusion (1: dense
  only, 0: sparse only; FindNeighborsRequest.Query.RRF).

The public endpoint's domain is read once from the IndexEndpoint resource
(``GET .../v1/{indexEndpoint}``: ``publicEndpointDomainName``). An HTTP error becomes the
google-api-core exception of its status (:func:`google.api_core.exceptions.from_http_status`),
which :func:`shared.adapters.gcp.calls.calling` sorts into retryable and refused. Each call has
one deadline and a bounded reply (:mod:`shared.adapters.deadline_http`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from google.api_core import exceptions as gexc

from shared.adapters.deadline_http import DeadlineTransport, one_deadline
from shared.adapters.gcp.access_token import default_token

#: One call's time limit; a findNeighbors answers in milliseconds, an upsert of 500 datapoints in seconds.
CALL_TIMEOUT_S = 30.0
#: The largest reply read (a findNeighbors of 1,000 neighbours without full datapoints is ~100 KB).
MAX_REPLY_BYTES = 8 * 1024 * 1024


class VectorSearchRest:
    """The index and its endpoint, as ``VertexVectorSearchIndex`` calls them.

    ``index`` and ``endpoint`` are resource names (``projects/p/locations/l/indexes/i``,
    ``.../indexEndpoints/e``); ``api_base`` is the regional service
    (``https://{l}-aiplatform.googleapis.com``); ``token`` returns an OAuth access token
    (None: no Authorization header, for a stand-in); ``query_base`` is the public endpoint's
    base URL when known (else read from the endpoint resource on first query).
    """

    def __init__(self, index: str, endpoint: str, *, api_base: str, token: Callable[[], str | None],
                 query_base: str | None = None, client: httpx.Client | None = None) -> None:
        self.index = index
        self.endpoint = endpoint
        self.api_base = api_base.rstrip("/")
        self._token = token
        self._query_base = query_base.rstrip("/") if query_base else None
        self._lock = threading.Lock()
        self._client = client or httpx.Client(transport=DeadlineTransport(), timeout=CALL_TIMEOUT_S)

    @classmethod
    def connect(cls, *, index_name: str, endpoint_name: str, project: str | None,
                location: str | None) -> VectorSearchRest:
        """With Application Default Credentials; ``index_name``/``endpoint_name`` may be ids."""
        if not location:
            raise gexc.InvalidArgument("Vector Search needs its region (GOOGLE_CLOUD_LOCATION)")
        token, default_project = default_token()
        project = project or default_project
        return cls(_resource(index_name, project, location, "indexes"),
                   _resource(endpoint_name, project, location, "indexEndpoints"),
                   api_base=f"https://{location}-aiplatform.googleapis.com", token=token)

    # ------------------------------------------------------------ IndexService

    def upsert_datapoints(self, datapoints: Sequence[dict[str, Any]]) -> None:
        self._post(f"{self.api_base}/v1/{self.index}:upsertDatapoints", {"datapoints": list(datapoints)})

    def remove_datapoints(self, datapoint_ids: Sequence[str]) -> None:
        self._post(f"{self.api_base}/v1/{self.index}:removeDatapoints", {"datapointIds": list(datapoint_ids)})

    # ------------------------------------------------------------ MatchService

    def find_neighbors(self, deployed_index_id: str, queries: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """Each query's neighbours (``{"datapoint": {"datapointId"}, "distance", "sparseDistance"}``), best first."""
        reply = self._post(f"{self.query_base()}/v1/{self.endpoint}:findNeighbors",
                           {"deployedIndexId": deployed_index_id, "queries": list(queries)})
        found = reply.get("nearestNeighbors") or []
        return [list(entry.get("neighbors") or []) for entry in found] + [[]] * (len(queries) - len(found))

    def query_base(self) -> str:
        with self._lock:
            if self._query_base is None:
                resource = self._request("GET", f"{self.api_base}/v1/{self.endpoint}", None)
                domain = resource.get("publicEndpointDomainName")
                if not domain:
                    raise gexc.FailedPrecondition(
                        f"index endpoint {self.endpoint} has no publicEndpointDomainName: ragbus queries a "
                        "public endpoint (infra/vertex.tf: public_endpoint_enabled)")
                self._query_base = domain if "://" in domain else f"https://{domain}"
            return self._query_base

    # ------------------------------------------------------------ transport

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", url, body)

    def _request(self, method: str, url: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        token = self._token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            with one_deadline(CALL_TIMEOUT_S, max_bytes=MAX_REPLY_BYTES):
                response = self._client.request(method, url, headers=headers,
                                                content=None if body is None else json.dumps(body))
        except httpx.TimeoutException as exc:
            raise gexc.DeadlineExceeded(f"{method} {url}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise gexc.ServiceUnavailable(f"{method} {url}: {exc}") from exc
        if response.status_code >= 400:
            raise gexc.from_http_status(response.status_code, f"{method} {url}: {_error_message(response)}")
        try:
            return response.json() if response.content else {}
        except ValueError as exc:
            raise gexc.Unknown(f"{method} {url}: the reply is not JSON") from exc

    def close(self) -> None:
        self._client.close()


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error") or {}
        return str(error.get("message") or error)[:500]
    except ValueError:
        return response.text[:500]


def _resource(name: str, project: str | None, location: str, kind: str) -> str:
    if name.startswith("projects/"):
        return name
    if not project:
        raise gexc.InvalidArgument(f"{kind} {name!r} is an id: its project (GOOGLE_CLOUD_PROJECT) is needed")
    return f"projects/{project}/locations/{location}/{kind}/{name}"
