"""A plain HTTP client for the console's tests: what a browser sends, header by header, with
its cookies, and nothing a browser would add on its own (the tests add Origin and Host)."""
import http.client
import re
from http.cookies import SimpleCookie
from urllib.parse import urlencode

TOKEN = re.compile(r'name="csrf_token" value="([^"]*)"')


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def csrf_token(self):
        found = TOKEN.search(self.body)
        return found.group(1) if found else None


class Visitor:
    """One browser: its cookie jar and the console it talks to."""

    def __init__(self, port):
        self.port = port
        self.cookies = {}
        self.set_cookies = []  # every Set-Cookie header received, as sent

    def request(self, method, path, fields=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if fields is not None:
            body = urlencode(fields)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            resp = conn.getresponse()
            got = Response(resp.status, resp.getheaders(), resp.read().decode())
        finally:
            conn.close()
        for k, v in got.headers:
            if k.lower() == "set-cookie":
                self.set_cookies.append(v)
                for name, morsel in SimpleCookie(v).items():
                    self.cookies[name] = morsel.value
        return got

    def get(self, path, **headers):
        return self.request("GET", path, headers=headers)

    def post(self, path, fields, **headers):
        return self.request("POST", path, fields, headers)

    def token(self, path="/topics"):
        """The CSRF token of a page's forms."""
        token = self.get(path).csrf_token()
        assert token, f"no CSRF token on {path}"
        return token

    def log_in(self, user, password):
        token = self.token("/login")
        return self.post("/login", {"csrf_token": token, "username": user,
                                    "password": password, "next": "/"})
