"""Locust's web API closed to anyone without the run's secret (a Locust that tritongen drives).

A Locust kept up across runs serves its web UI and REST API (``/swarm``, ``/stop``) on
127.0.0.1; without a guard any user of the machine could start or stop a test in it. Locust's
own ``--web-login`` needs a login page of the locustfile's making; here tritongen puts a
per-process secret in the environment (``WEB_TOKEN_ENV``) and every request must carry it in
``WEB_TOKEN_HEADER``: one without it is refused with 401 before Locust sees it.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from .shared import WEB_TOKEN_ENV, WEB_TOKEN_HEADER


def guard_web_ui(web_ui: Any) -> None:
    """Refuse every request to ``web_ui`` without the secret, where tritongen gave one (else nothing)."""
    token = os.environ.get(WEB_TOKEN_ENV, "")
    if web_ui is None or not token:
        return
    from flask import Response, request

    expected = token.encode()

    def check() -> Response | None:
        given = request.headers.get(WEB_TOKEN_HEADER, "").encode()
        if hmac.compare_digest(given, expected):
            return None
        return Response("this Locust is driven by tritongen: a request needs its secret\n", status=401)

    web_ui.app.before_request(check)
