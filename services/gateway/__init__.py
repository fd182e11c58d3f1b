"""The gateway: HTTP API, Server-Sent Events, OpenAPI, MCP and the web page.

``create_app(deps)`` builds the ASGI app; ``serve(deps, host, port)`` runs it with
uvicorn in this process (``ragbus serve`` and tests); ``main.py`` is the Cloud
Function entry point.
"""

from services.gateway.app import create_app
from services.gateway.server import ServerHandle, serve

__all__ = ["ServerHandle", "create_app", "serve"]
