"""`gobblin-py serve`: the status page and its JSON API over the jobs' state stores (the optional extra `ui`)."""

from __future__ import annotations

import socket
from pathlib import Path

from gobblin_py.errors import ConfigError
from gobblin_py.operating.overview import LagLimits


def serve(paths: list[Path], host: str = "127.0.0.1", port: int = 8080, *, token: str | None = None,
          metrics: object = None, limits: LagLimits = LagLimits(), lag_timeout_s: float = 10.0) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's handlers); ConfigError when the port cannot be had."""
    try:
        import uvicorn

        from gobblin_py.operating.server.app import Jobs, create_app
    except ImportError as exc:
        raise ConfigError(f"gobblin-py serve needs the `ui` extra ({exc.name} is not installed): "
                          "pip install 'gobblin-py[ui]'") from None
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise ConfigError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another port") from None
    app = create_app(Jobs(paths, lag_timeout_s=lag_timeout_s, limits=limits), metrics=metrics, token=token)  # type: ignore[arg-type]
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=3)
