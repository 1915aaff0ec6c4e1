"""Puts a JSON-LD document into rocrate-validator's HTTP cache so that `--offline` runs find
it: `python seed.py CACHE_DIR URL FILE` (the machine that runs the tests may have no network).
"""
import io
import sys

import requests
import requests_cache
from urllib3.response import HTTPResponse


class FileAdapter(requests.adapters.HTTPAdapter):
    """Answers every request with the file's bytes, as the URL would."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def send(self, request, **kwargs):
        with open(self.path, "rb") as f:
            body = f.read()
        raw = HTTPResponse(
            body=io.BytesIO(body),
            headers={"Content-Type": "application/ld+json"},
            status=200,
            preload_content=False,
            request_url=request.url,
        )
        return self.build_response(request, raw)


cache_dir, url, path = sys.argv[1:4]
session = requests_cache.CachedSession(
    cache_name=f"{cache_dir}/http_cache", backend="sqlite", expire_after=-1
)
session.mount(url, FileAdapter(path))
headers = {"Accept": "application/ld+json, application/json, */*;q=0.1"}
response = session.get(url, headers=headers, allow_redirects=True)
response.raise_for_status()
assert "@context" in response.json(), "not a JSON-LD context"
