"""precis as an HTTP service: `create_app` builds it, `precis serve` runs it with uvicorn."""

from precis.server.app import create_app
from precis.server.limits import ServiceLimits

__all__ = ["ServiceLimits", "create_app"]
