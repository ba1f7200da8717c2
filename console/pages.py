"""Rendering the console's pages: Jinja2 templates, server side, each given what every page
shows besides its own data (who is logged in, the session's CSRF token for its forms,
whether the console is read-only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates


def _common(request: Request) -> dict[str, Any]:
    session = getattr(request.state, "session", None)
    policy = request.app.state.policy
    return {"csrf_token": request.app.state.sessions.csrf_token(session) if session else "",
            "user": session.user.username if session is not None and session.user else None,
            "read_only": policy.read_only, "login": policy.login,
            "connect": bool(request.app.state.console.connect_urls)}


TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"),
                            context_processors=[_common])


def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status)
