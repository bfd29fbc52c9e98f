"""moto_server that handles one request at a time (used by with-moto.sh).

DynamoDB applies a conditional write atomically per item. moto_server serves
requests on threads and checks a condition, then writes, with no lock in
between, so two racing conditional writes can both succeed (the store
conformance suite's racing-writers test saw it in about one run in four).
Serving requests one by one restores the atomicity the tests rely on. Idle
keep-alive connections still have threads of their own, so one client
cannot block the others; only the handling itself is serialized.

Usage: moto_server_serialized.py -H 127.0.0.1 -p PORT
"""

import argparse
import os
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


class OneAtATime:
    """A WSGI middleware that runs the wrapped application under a lock."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            result = self.app(environ, start_response)
            try:
                # Produce the whole body under the lock: a lazy iterable
                # would otherwise run the backend after the lock is released.
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = OneAtATime(DomainDispatcherApplication(create_backend_app))
    run_simple(
        args.host,
        args.port,
        app,
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
