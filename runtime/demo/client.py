"""A small JSON client of the API for the demo, on the standard library (httpx is a development dependency only).
A 429 (a key's rate limit) or a 503 (back-pressure) is retried after the Retry-After the server answers."""

import json
import time
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

API_PREFIX = "/api/v1"


class _NoRedirects(HTTPRedirectHandler):
    """A redirect is an error here: following one would send the key to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = build_opener(_NoRedirects)
RETRIES = 8
LONGEST_WAIT_S = 60.0


class DemoError(Exception):
    """What stops the demo, said to the person who ran it."""


class ApiError(DemoError):
    def __init__(self, method: str, path: str, status: int, message: object):
        super().__init__(f"{method} {path} answered {status}: {message}")
        self.status = status


class Client:
    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 30):
        if urlsplit(base_url).scheme not in ("http", "https"):  # urllib would open file: and ftp: addresses too
            raise DemoError(f"--url must be an http:// or https:// address, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s

    def with_key(self, api_key: str) -> "Client":
        return Client(self.base_url, api_key, self.timeout_s)

    def check_server(self) -> None:
        try:
            with _OPENER.open(f"{self.base_url}/health", timeout=self.timeout_s) as response:
                response.read()
        except (URLError, OSError) as exc:
            raise DemoError(
                f"no rewards server answers at {self.base_url} ({exc}): start one (`make run` or `rewards serve`),"
                " or pass its address with --url"
            ) from exc

    def get(self, path: str, **params) -> object:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: object) -> object:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: object) -> object:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: object) -> object:
        return self.request("PATCH", path, body=body)

    def request(self, method: str, path: str, body: object = None, params: dict | None = None) -> object:
        url = self.base_url + API_PREFIX + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(RETRIES):
            try:
                with _OPENER.open(Request(url, data, headers, method=method), timeout=self.timeout_s) as response:
                    return json.loads(response.read() or b"null")
            except HTTPError as exc:
                answer = exc.read()
                if exc.code not in (429, 503) or attempt == RETRIES - 1:
                    raise ApiError(method, path, exc.code, _message(answer)) from None
                time.sleep(min(float(exc.headers.get("Retry-After") or 1), LONGEST_WAIT_S))
            except (URLError, OSError) as exc:  # after HTTPError, one of its kind
                raise DemoError(f"{method} {path}: the server at {self.base_url} did not answer ({exc})") from exc
        raise AssertionError("unreachable")


def _message(answer: bytes) -> object:
    try:
        return json.loads(answer).get("message", answer.decode(errors="replace"))
    except (ValueError, AttributeError):
        return answer.decode(errors="replace")
