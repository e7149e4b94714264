"""A corpus of malformed and hostile requests against a real redlite-server: broken JSON, wrong
types, out-of-range and huge numbers, invalid UTF-8, oversize headers and bodies, broken HTTP
framing and slow clients. Every request must get the right status with an error body of the
right shape, and the server must stay up, idle and correct afterwards. Standard library only."""
import json
import socket
import sys
import threading
import time
import unittest

from server_harness import Server, chat

MODEL = "tiny-f32"
OK_MESSAGES = [{"role": "user", "content": "hi"}]


def chat_with(**fields):
    body = {"model": MODEL, "messages": OK_MESSAGES, "max_tokens": 2}
    body.update(fields)
    return body


def typed_cases():
    """(description, body, expected status) for parameters of the wrong type or range."""
    cases = []
    wrong = {"string": "x", "array": [1], "object": {"a": 1}, "bool": True}
    numeric = ["temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
               "repetition_penalty"]
    integer = ["max_tokens", "max_completion_tokens", "top_k", "seed", "n", "top_logprobs"]
    for name in numeric + integer:
        for tname, value in wrong.items():
            if name == "seed" and tname == "bool":
                continue
            cases.append((f"{name} as {tname}", chat_with(**{name: value}), 400))
    ranges = {
        "temperature": ([0, 0.5, 2], [-0.01, 2.01, 1e308, -1e308]),
        "top_p": ([0, 0.3, 1], [-0.5, 1.0001, 10]),
        "min_p": ([0, 1], [-1, 1.5]),
        "presence_penalty": ([-2, 0, 2], [-2.5, 2.5]),
        "frequency_penalty": ([-2, 2], [-3, 3]),
        "top_k": ([0, 1, 40, 2147483647], [-1, 2147483648, 1.5]),
        "max_tokens": ([1, 2], [0, -1, 2.5, 2147483648, 1e20, 10 ** 30]),
        "seed": ([0, -5, 2 ** 63 - 1], [2 ** 64, 1.5, 1e300]),
        "n": ([1], [0, 2, 100]),
    }
    for name, (good, bad) in ranges.items():
        for v in good:
            cases.append((f"{name}={v}", chat_with(**{name: v}), 200))
        for v in bad:
            cases.append((f"{name}={v}", chat_with(**{name: v}), 400))
    # null means "not given" in OpenAI's API.
    for name in numeric + integer + ["stop", "tools", "tool_choice", "logit_bias", "stream"]:
        cases.append((f"{name}=null", chat_with(**{name: None}), 200))
    more = [
        ("model missing", {"messages": OK_MESSAGES}, 400),
        ("model number", {"model": 1, "messages": OK_MESSAGES}, 400),
        ("model unknown", {"model": "gpt-4", "messages": OK_MESSAGES}, 404),
        ("model empty", {"model": "", "messages": OK_MESSAGES}, 404),
        ("messages missing", {"model": MODEL}, 400),
        ("messages object", {"model": MODEL, "messages": {"role": "user"}}, 400),
        ("messages empty", {"model": MODEL, "messages": []}, 400),
        ("message string", {"model": MODEL, "messages": ["hi"]}, 400),
        ("message null", {"model": MODEL, "messages": [None]}, 400),
        ("role missing", {"model": MODEL, "messages": [{"content": "hi"}]}, 400),
        ("role unknown", {"model": MODEL, "messages": [{"role": "god", "content": "hi"}]}, 400),
        ("role number", {"model": MODEL, "messages": [{"role": 1, "content": "hi"}]}, 400),
        ("content missing", {"model": MODEL, "messages": [{"role": "user"}]}, 400),
        ("content number", {"model": MODEL, "messages": [{"role": "user", "content": 1}]}, 400),
        ("content object", {"model": MODEL, "messages": [{"role": "user", "content": {}}]}, 400),
        ("content parts ok", {"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}, 200),
        ("content part image", {"model": MODEL, "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400),
        ("content part no type", {"model": MODEL, "messages": [{"role": "user", "content": [{"text": "a"}]}]}, 400),
        ("content part text number", {"model": MODEL, "messages": [
            {"role": "user", "content": [{"type": "text", "text": 5}]}]}, 400),
        ("developer role", {"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "developer", "content": "be kind"}, {"role": "user", "content": "hi"}]}, 200),
        ("tool message", {"model": MODEL, "max_tokens": 2, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]}, 200),
        ("tool_calls not array", {"model": MODEL, "messages": [
            {"role": "assistant", "content": "x", "tool_calls": "f"}]}, 400),
        ("tool_call no function", {"model": MODEL, "messages": [
            {"role": "assistant", "content": "x", "tool_calls": [{"id": "a", "type": "function"}]}]}, 400),
        ("tool_call arguments number", {"model": MODEL, "messages": [
            {"role": "assistant", "tool_calls": [{"id": "a", "type": "function",
                                                  "function": {"name": "f", "arguments": 5}}]}]}, 400),
        ("stop string", chat_with(stop="x"), 200),
        ("stop four", chat_with(stop=["a", "b", "c", "d"]), 200),
        ("stop five", chat_with(stop=["a", "b", "c", "d", "e"]), 400),
        ("stop empty string", chat_with(stop=[""]), 400),
        ("stop number", chat_with(stop=5), 400),
        ("stop array of numbers", chat_with(stop=[5]), 400),
        ("logit_bias ok", chat_with(logit_bias={"5": -100, "6": 100}), 200),
        ("logit_bias array", chat_with(logit_bias=[1]), 400),
        ("logit_bias bad key", chat_with(logit_bias={"abc": 1}), 400),
        ("logit_bias negative key", chat_with(logit_bias={"-1": 1}), 400),
        ("logit_bias key beyond vocab", chat_with(logit_bias={"512": 1}), 400),
        ("logit_bias huge key", chat_with(logit_bias={"99999999999999999999": 1}), 400),
        ("logit_bias value string", chat_with(logit_bias={"5": "1"}), 400),
        ("logit_bias value 101", chat_with(logit_bias={"5": 101}), 400),
        ("logprobs string", chat_with(logprobs="yes"), 400),
        ("top_logprobs without logprobs", chat_with(top_logprobs=2), 400),
        ("top_logprobs 21", chat_with(logprobs=True, top_logprobs=21), 400),
        ("logprobs ok", chat_with(logprobs=True, top_logprobs=20), 200),
        ("response_format text", chat_with(response_format={"type": "text"}), 200),
        ("response_format json", chat_with(response_format={"type": "json_object"}), 400),
        ("response_format schema", chat_with(response_format={"type": "json_schema"}), 400),
        ("response_format string", chat_with(response_format="json"), 400),
        ("functions legacy", chat_with(functions=[{"name": "f"}]), 400),
        ("stream_options without stream", chat_with(stream_options={"include_usage": True}), 400),
        ("stream_options bad", chat_with(stream=True, stream_options={"include_usage": "y"}), 400),
        ("tools not array", chat_with(tools={"type": "function"}), 400),
        ("tool wrong type", chat_with(tools=[{"type": "retrieval"}]), 400),
        ("tool no name", chat_with(tools=[{"type": "function", "function": {}}]), 400),
        ("tool name too long", chat_with(tools=[{"type": "function", "function": {"name": "f" * 200}}]), 400),
        ("tool params string", chat_with(tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}]), 400),
        ("tool_choice unknown", chat_with(tool_choice="sometimes"), 400),
        ("tool_choice required no tools", chat_with(tool_choice="required"), 400),
        ("tool_choice named missing", chat_with(tools=[{"type": "function", "function": {"name": "f"}}],
                                                tool_choice={"type": "function", "function": {"name": "g"}}), 400),
        ("tool_choice number", chat_with(tool_choice=3), 400),
        ("parallel_tool_calls string", chat_with(parallel_tool_calls="no"), 400),
        ("chat_template_kwargs bad", chat_with(chat_template_kwargs={"enable_thinking": "yes"}), 400),
        ("prompt too long", chat_with(messages=[{"role": "user", "content": "word " * 600}]), 400),
        ("unknown extra field", chat_with(frobnicate=True), 200),
    ]
    return cases + more


def completion_cases():
    c = lambda **f: dict({"model": MODEL, "max_tokens": 2}, **f)
    return [
        ("completion ok", c(prompt="Once"), 200),
        ("completion tokens", c(prompt=[1, 2, 3]), 200),
        ("completion nested tokens", c(prompt=[[1, 2, 3]]), 200),
        ("completion no prompt", c(), 400),
        ("completion prompt number", c(prompt=5), 400),
        ("completion prompt object", c(prompt={}), 400),
        ("completion several prompts", c(prompt=["a", "b"]), 400),
        ("completion token out of vocab", c(prompt=[1, 512]), 400),
        ("completion negative token", c(prompt=[-1]), 400),
        ("completion float token", c(prompt=[1.5]), 400),
        ("completion empty prompt", c(prompt=""), 400),
        ("completion empty token list", c(prompt=[]), 400),
        ("completion suffix", c(prompt="a", suffix="b"), 400),
        ("completion best_of", c(prompt="a", best_of=2), 400),
        ("completion logprobs 6", c(prompt="a", logprobs=6), 400),
        ("completion echo logprobs", c(prompt="a", echo=True, logprobs=1), 400),
        ("completion echo", c(prompt="a", echo=True), 200),
        ("completion max_tokens 0", c(prompt="a", max_tokens=0), 200),
        ("completion prompt too long", c(prompt=list(range(1, 300))), 400),
    ]


def anthropic_cases():
    a = lambda **f: dict({"model": MODEL, "max_tokens": 2, "messages": OK_MESSAGES}, **f)
    block = lambda *blocks: a(messages=[{"role": "user", "content": list(blocks)}])
    return [
        ("messages ok", a(), 200),
        ("messages no max_tokens", {"model": MODEL, "messages": OK_MESSAGES}, 400),
        ("messages max_tokens 0", a(max_tokens=0), 400),
        ("messages max_tokens string", a(max_tokens="2"), 400),
        ("messages no model", {"max_tokens": 2, "messages": OK_MESSAGES}, 400),
        ("messages unknown model", a(model="claude-9"), 404),
        ("messages system role", a(messages=[{"role": "system", "content": "x"}]), 400),
        ("messages temperature 1.5", a(temperature=1.5), 400),
        ("messages top_k -1", a(top_k=-1), 400),
        ("messages stop_sequences string", a(stop_sequences="x"), 400),
        ("messages system blocks", a(system=[{"type": "text", "text": "be brief"}]), 200),
        ("messages system number", a(system=5), 400),
        ("messages image block", block({"type": "image", "source": {}}), 400),
        ("messages unknown block", block({"type": "hologram"}), 400),
        ("messages text block no text", block({"type": "text"}), 400),
        ("messages tool_result no id", block({"type": "tool_result", "content": "x"}), 400),
        ("messages tool_result ok", a(messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]), 200),
        ("messages tool_use input string", a(messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": "x"}]},
            {"role": "user", "content": "go"}]), 400),
        ("messages tool no schema", a(tools=[{"name": "f"}]), 400),
        ("messages server tool", a(tools=[{"type": "web_search_20250305", "name": "web_search"}]), 400),
        ("messages tool_choice any no tools", a(tool_choice={"type": "any"}), 400),
        ("messages tool_choice bad", a(tool_choice={"type": "maybe"}), 400),
        ("messages thinking enabled", a(thinking={"type": "enabled", "budget_tokens": 1024}), 200),
        ("messages thinking bad", a(thinking={"type": "sometimes"}), 400),
        ("messages prefill", a(messages=[{"role": "user", "content": "hi"},
                                         {"role": "assistant", "content": "Sure"}]), 200),
        ("count_tokens", {"model": MODEL, "messages": OK_MESSAGES}, 200),
    ]


def broken_json_bodies():
    valid = json.dumps(chat_with()).encode()
    bodies = [valid[:n] for n in range(0, len(valid), 7)]
    bodies += [
        b"{", b"}", b"[", b"]", b"{}", b"[]", b"null", b"true", b"1", b'"x"', b"{,}",
        b"{'model': 'x'}", b'{"model": tiny}', b'{"model": "tiny-f32",}', b'{"a" "b"}',
        valid + b"garbage", valid + b"}", b"/* c */" + valid,
        b'{"temperature": NaN, "model": "tiny-f32"}', b'{"temperature": Infinity}',
        b'{"max_tokens": 1e999999}', b'{"x": -}', b'{"x": 01}', b'{"x": .5}', b'{"x": 1.}',
        b'{"x": "\\u12"}', b'{"x": "\\ud800"}', b'{"x": "\\q"}', b'{"x": "\x01"}',
        b"[" * 100000 + b"]" * 100000, b'{"a":' * 5000 + b"1" + b"}" * 5000,
        b"\x00" * 64, bytes(range(256)), b" " * 1000, b"\n\t\r ",
    ]
    return bodies


def invalid_utf8_bodies():
    out = []
    for bad in [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
                b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xbf", b"a\xc3(b", b"\xf4\x90\x80\x80"]:
        body = b'{"model": "tiny-f32", "max_tokens": 2, "messages": [{"role": "user", "content": "x' + bad + b'y"}]}'
        out.append(body)
        out.append(b'{"model": "tiny-f32' + bad + b'", "messages": []}')
    return out


def raw_exchange(port, data, read_timeout=10.0, pieces=1, gap=0.0):
    """Sends raw bytes (optionally in pieces with gaps) and returns the status code (or None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        step = max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            s.sendall(data[i:i + step])
            if gap:
                time.sleep(gap)
        response = b""
        while b"\r\n" not in response:
            chunk = s.recv(4096)
            if not chunk:
                break
            response += chunk
        line = response.split(b"\r\n", 1)[0].split(b" ")
        return int(line[1]) if len(line) > 1 and line[1].isdigit() else None
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return None
    finally:
        s.close()


def http_request(path, body=b"", method="POST", extra=b""):
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


class MalformedRequests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--ctx", "256", "--parallel", "2", "--max-body", "1")
        cls.checked = 0

    @classmethod
    def tearDownClass(cls):
        print(f"\n{cls.checked} requests checked", file=sys.stderr)
        cls.server.stop()

    def check(self, what, status, data, expected, anthropic=False):
        self.__class__.checked += 1
        expected = expected if isinstance(expected, (set, tuple)) else {expected}
        self.assertIn(status, expected, f"{what}: got {status}: {data[:300]!r}")
        if status >= 400 and data:
            body = json.loads(data)
            if anthropic:
                self.assertEqual(body["type"], "error", what)
                self.assertIsInstance(body["error"]["type"], str, what)
                self.assertIsInstance(body["error"]["message"], str, what)
            else:
                self.assertIsInstance(body["error"]["message"], str, what)
                self.assertIsInstance(body["error"]["type"], str, what)
        self.assertTrue(self.server.alive(), f"server died after {what}")

    def test_typed_parameters(self):
        for what, body, expected in typed_cases():
            status, data = self.server.post("/v1/chat/completions", body)
            self.check(what, status, data, expected)
            if status == 200:
                self.assertEqual(json.loads(data)["object"], "chat.completion", what)

    def test_context_error_names_lengths(self):
        status, data = self.server.post("/v1/chat/completions", chat("word " * 600))
        self.assertEqual(status, 400)
        message = json.loads(data)["error"]["message"]
        self.assertIn("256", message)
        self.assertRegex(message, r"prompt is \d+ tokens")

    def test_completions(self):
        for what, body, expected in completion_cases():
            self.check(what, *self.server.post("/v1/completions", body), expected)

    def test_anthropic(self):
        for what, body, expected in anthropic_cases():
            path = "/v1/messages/count_tokens" if what == "count_tokens" else "/v1/messages"
            self.check(what, *self.server.post(path, body), expected, anthropic=True)

    def test_broken_json(self):
        for i, body in enumerate(broken_json_bodies()):
            for path in ("/v1/chat/completions", "/v1/messages", "/v1/completions", "/tokenize"):
                status, data = self.server.post(path, body)
                self.check(f"broken json #{i} to {path}: {body[:40]!r}", status, data, 400,
                           anthropic=path == "/v1/messages")

    def test_invalid_utf8(self):
        for body in invalid_utf8_bodies():
            self.check(f"invalid utf-8 {body[:60]!r}",
                       *self.server.post("/v1/chat/completions", body), 400)
        # Invalid UTF-8 in the path or a header does not crash anything either.
        status = raw_exchange(self.server.port, b"GET /v1/mod\xffels HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(status, {400, 404})
        status = raw_exchange(self.server.port,
                              b"GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: \xff\xfe\r\n\r\n")
        self.assertIn(status, {200, 400})

    def test_routes_and_methods(self):
        cases = [("GET", "/nope", 404), ("POST", "/v2/chat/completions", 404), ("GET", "/", 404),
                 ("GET", "/v1/chat/completions", 405), ("PUT", "/v1/chat/completions", 405),
                 ("DELETE", "/v1/models", 405), ("PATCH", "/health", 405),
                 ("OPTIONS", "/v1/messages", 405), ("GET", "/v1/messages", 405),
                 ("GET", "/v1/models/nope", 404), ("GET", "/v1/models/tiny-f32", 200),
                 ("GET", "/models", 200), ("POST", "/chat/completions", 200),
                 ("GET", "/health", 200), ("HEAD", "/health", 200), ("GET", "/metrics", 200)]
        for method, path, expected in cases:
            body = chat("hi") if method == "POST" else None
            status, headers, data = self.server.request(method, path, body)
            self.check(f"{method} {path}", status, data, expected,
                       anthropic=path.startswith("/v1/messages"))
            if status == 405:
                self.assertIn("Allow", headers)

    def test_oversize_body_and_headers(self):
        big = b'{"model": "tiny-f32", "messages": [{"role": "user", "content": "' + b"a" * (2 << 20) + b'"}]}'
        status, data = self.server.post("/v1/chat/completions", big)
        self.check("2 MiB body", status, data, 413)
        status, data = self.server.post("/v1/messages", big)
        self.check("2 MiB body (anthropic)", status, data, 413, anthropic=True)
        port = self.server.port
        self.assertEqual(raw_exchange(port, http_request("/v1/models", method="GET",
                                                         extra=b"X-Big: " + b"b" * 20000 + b"\r\n")), 400)
        self.assertIn(raw_exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
                      {400, 414})
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(2000))
        self.assertIn(raw_exchange(port, http_request("/health", method="GET", extra=many)),
                      {200, 400, 431})
        # A Content-Length far beyond the limit is refused without reading the body.
        self.assertEqual(raw_exchange(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Length: 99999999999\r\n\r\n{"), 413)

    def test_broken_framing(self):
        port = self.server.port
        body = json.dumps(chat("hi")).encode()
        cases = [
            (b"GARBAGE\r\n\r\n", {400, None}),
            (b"GET\r\n\r\n", {400, None}),
            (b"\r\n\r\n", {400, None}),
            (b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", {200, 400, 505}),
            (b"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", {400, 405}),
            (b"GET /health HTTP/1.0\r\n\r\n", {200}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", {400}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", {400}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
             b"Content-Length: 6\r\n\r\n{}", {400}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n", {200}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"zz\r\nabc\r\n0\r\n\r\n", {400}),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\x00\x00\x00}", {400}),
            (b"GET /health\x00 HTTP/1.1\r\nHost: x\r\n\r\n", {400, 404}),
            (b"GET /health HTTP/1.1\r\nHost: x\r\nNoColonHeader\r\n\r\n", {200, 400}),
        ]
        for data, expected in cases:
            self.checked_raw(data, raw_exchange(port, data), expected)

    def checked_raw(self, data, status, expected):
        self.__class__.checked += 1
        self.assertIn(status, expected, f"{data[:80]!r}")
        self.assertTrue(self.server.alive())

    def test_slow_and_stalled_clients(self):
        port = self.server.port
        body = json.dumps(chat("hi")).encode()
        # Trickled in pieces: still answered.
        self.assertEqual(raw_exchange(port, http_request("/v1/chat/completions", body),
                                      pieces=8, gap=0.15), 200)
        # Clients that stall mid-headers or mid-body, and ones that vanish: others are served
        # meanwhile.
        stalled = []
        for partial in [b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
                        http_request("/v1/chat/completions", body)[:-10],
                        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"]:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(partial)
            stalled.append(s)
        for _ in range(3):
            status, data = self.server.post("/v1/chat/completions", chat("still there?"))
            self.check("request beside stalled clients", status, data, 200)
        for s in stalled:
            s.close()
        # Half-written requests abandoned at once.
        for n in range(1, 40, 3):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(http_request("/v1/chat/completions", body)[:n * 5])
            s.close()
        self.assertEqual(self.server.health()["status"], "ok")

    def test_disconnect_mid_stream_frees_the_session(self):
        body = json.dumps(chat("tell me everything", max_tokens=200, stream=True,
                               logit_bias={"509": -100, "510": -100, "511": -100})).encode()
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", self.server.port))
            s.sendall(http_request("/v1/chat/completions", body))
            self.assertIn(b"200 OK", s.recv(4096))
            s.close()
        self.assertTrue(self.server.wait_idle(), "a session stayed busy after its client left")

    def test_zz_server_still_correct(self):
        status, data = self.server.post("/v1/chat/completions", chat("final check"))
        self.assertEqual(status, 200)
        self.assertTrue(self.server.wait_idle())
        metrics = self.server.get("/metrics")[1].decode()
        self.assertIn("redlite_slots_busy 0", metrics)


if __name__ == "__main__":
    unittest.main(verbosity=2)
