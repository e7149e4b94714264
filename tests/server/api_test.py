"""redlite-server over raw HTTP (standard library only): the Anthropic Messages endpoint,
concurrency beyond the session count, prefix reuse that must not change results, and graceful
shutdown with requests in flight."""
import json
import math
import os
import signal
import socket
import sys
import threading
import time
import unittest

from server_harness import Server, chat, sse_events

MODEL = "tiny-f32"
NO_END = {"509": -100, "510": -100, "511": -100}  # keep the random model talking


def messages(content, **extra):
    body = {"model": MODEL, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return body


class Anthropic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--alias", "claude-test")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_message_shape_and_usage(self):
        status, data = self.server.post("/v1/messages", messages("Hello", system="Be brief."))
        self.assertEqual(status, 200, data)
        m = json.loads(data)
        self.assertEqual(m["type"], "message")
        self.assertEqual(m["role"], "assistant")
        self.assertTrue(m["id"].startswith("msg_"))
        self.assertIn(m["stop_reason"], {"end_turn", "max_tokens"})
        for block in m["content"]:
            self.assertIn(block["type"], {"text", "thinking", "tool_use"})
        u = m["usage"]
        self.assertGreater(u["input_tokens"] + u["cache_read_input_tokens"], 0)
        self.assertLessEqual(u["output_tokens"], 8)

    def test_alias_is_accepted(self):
        status, data = self.server.post("/v1/messages", messages("Hi", model="claude-test"))
        self.assertEqual(status, 200, data)
        self.assertEqual(json.loads(data)["model"], "claude-test")

    def test_stream_event_order_and_equality_with_non_stream(self):
        body = messages("Stream me something", max_tokens=16)
        full = json.loads(self.server.post("/v1/messages", body)[1])
        status, data = self.server.post("/v1/messages", dict(body, stream=True))
        self.assertEqual(status, 200)
        events = sse_events(data)
        names = [n for n, _ in events]
        self.assertEqual(names[0], "message_start")
        self.assertEqual(names[-2:], ["message_delta", "message_stop"])
        for name, payload in events:
            self.assertEqual(payload["type"], name)
        text, open_blocks = "", set()
        for name, p in events:
            if name == "content_block_start":
                open_blocks.add(p["index"])
            elif name == "content_block_delta":
                self.assertIn(p["index"], open_blocks)
                text += p["delta"].get("text", "")
            elif name == "content_block_stop":
                open_blocks.remove(p["index"])
        self.assertFalse(open_blocks)
        full_text = "".join(b.get("text", "") for b in full["content"] if b["type"] == "text")
        self.assertEqual(text, full_text)
        delta = events[-2][1]
        self.assertEqual(delta["delta"]["stop_reason"], full["stop_reason"])
        self.assertEqual(delta["usage"]["output_tokens"], full["usage"]["output_tokens"])

    def test_tools_tool_use_and_tool_result_history(self):
        tools = [{"name": "get_weather", "description": "Weather in a city",
                  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
        history = [
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should call the tool.", "signature": "x"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "21C"}]},
                {"type": "text", "text": "Thanks, and Paris?"}]},
        ]
        for choice in [None, {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "get_weather"},
                       {"type": "none"}]:
            body = {"model": MODEL, "max_tokens": 16, "temperature": 0, "tools": tools, "messages": history}
            if choice:
                body["tool_choice"] = choice
            status, data = self.server.post("/v1/messages", body)
            self.assertEqual(status, 200, data)
            m = json.loads(data)
            for block in m["content"]:
                if block["type"] == "tool_use":
                    self.assertEqual(block["name"], "get_weather")
                    self.assertIsInstance(block["input"], dict)
            if m["stop_reason"] == "tool_use":
                self.assertTrue(any(b["type"] == "tool_use" for b in m["content"]))
            status, data = self.server.post("/v1/messages", dict(body, stream=True))
            self.assertEqual(status, 200)
            self.assertEqual(sse_events(data)[-1][0], "message_stop")

    def test_follow_up_reports_cache_read_tokens(self):
        first = json.loads(self.server.post("/v1/messages", messages("Question one about caching"))[1])
        reply = "".join(b.get("text", "") for b in first["content"])
        body = {"model": MODEL, "max_tokens": 4, "temperature": 0, "messages": [
            {"role": "user", "content": "Question one about caching"},
            {"role": "assistant", "content": reply or "ok"},
            {"role": "user", "content": "Question two"}]}
        second = json.loads(self.server.post("/v1/messages", body)[1])
        self.assertGreater(second["usage"]["cache_read_input_tokens"], 0, second["usage"])

    def test_count_tokens_and_errors(self):
        status, data = self.server.post("/v1/messages/count_tokens",
                                        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(status, 200)
        count = json.loads(data)["input_tokens"]
        full = json.loads(self.server.post("/v1/messages", messages("hi", max_tokens=1))[1])
        self.assertEqual(count, full["usage"]["input_tokens"] + full["usage"]["cache_read_input_tokens"])
        status, data = self.server.post("/v1/messages", {"model": MODEL, "messages": []})
        self.assertEqual(status, 400)
        err = json.loads(data)
        self.assertEqual(err["type"], "error")
        self.assertEqual(err["error"]["type"], "invalid_request_error")


class Concurrency(unittest.TestCase):
    def test_more_clients_than_sessions(self):
        server = Server("--parallel", "2", "--queue", "3")
        try:
            prompts = [f"Client {i} asks about topic number {i * 7}" for i in range(14)]
            # Greedy answers, one at a time first.
            expected = {}
            for p in prompts:
                status, data = server.post("/v1/chat/completions", chat(p, max_tokens=10))
                self.assertEqual(status, 200)
                expected[p] = json.loads(data)["choices"][0]["message"]["content"]
            results = {}
            barrier = threading.Barrier(len(prompts))

            def client(p, stream):
                barrier.wait()
                body = chat(p, max_tokens=10, stream=stream)
                status, headers, data = server.request("POST", "/v1/chat/completions", body)
                results[(p, stream)] = (status, headers, data)

            for stream in (False, True):
                threads = [threading.Thread(target=client, args=(p, stream)) for p in prompts]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120)
            self.assertEqual(len(results), 2 * len(prompts), "a request got no answer")
            answered = refused = 0
            for (p, stream), (status, headers, data) in results.items():
                self.assertIn(status, {200, 429}, data[:200])
                if status == 429:
                    refused += 1
                    self.assertGreaterEqual(int(headers["Retry-After"]), 1)
                    self.assertEqual(json.loads(data)["error"]["type"], "rate_limit_error")
                    continue
                answered += 1
                if stream:
                    text = "".join(e["choices"][0]["delta"].get("content") or ""
                                   for _, e in sse_events(data) if isinstance(e, dict) and e["choices"])
                else:
                    text = json.loads(data)["choices"][0]["message"]["content"]
                self.assertEqual(text, expected[p], f"answer mixed up for {p!r} (stream={stream})")
            self.assertGreaterEqual(answered, 2 * 5)  # at least the slots + queue each round
            print(f"\n{answered} answered, {refused} refused with 429", file=sys.stderr)
            self.assertTrue(server.wait_idle())
        finally:
            server.stop()


def top_logprobs(server, body):
    status, data = server.post("/v1/chat/completions", body)
    assert status == 200, data
    r = json.loads(data)
    return r, [(e["token"], e["logprob"], {t["token"]: t["logprob"] for t in e["top_logprobs"]})
               for e in r["choices"][0]["logprobs"]["content"]]


class PrefixReuse(unittest.TestCase):
    def test_resumed_conversation_matches_a_cold_one(self):
        warm = Server("--chunk", "16")
        cold = Server("--no-prefix-reuse")
        try:
            conversation = [{"role": "system", "content": "You are a careful assistant. " * 8},
                            {"role": "user", "content": "First, describe the sea in detail."}]
            first = json.loads(warm.post("/v1/chat/completions",
                                         {"model": MODEL, "messages": conversation, "max_tokens": 12,
                                          "temperature": 0})[1])
            conversation += [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                             {"role": "user", "content": "Now the mountains."}]
            body = {"model": MODEL, "messages": conversation, "max_tokens": 16, "temperature": 0,
                    "logprobs": True, "top_logprobs": 5, "logit_bias": NO_END}
            resumed, warm_lp = top_logprobs(warm, body)
            fresh, cold_lp = top_logprobs(cold, body)
            cached = resumed["usage"]["prompt_tokens_details"]["cached_tokens"]
            self.assertGreater(cached, first["usage"]["prompt_tokens"] - 2)
            self.assertEqual(fresh["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
            self.assertEqual(resumed["usage"]["prompt_tokens"], fresh["usage"]["prompt_tokens"])
            # Same tokens and the same distribution (to float32 noise: the resumed run splits the
            # prompt into different chunks). Compare up to a near tie, where greedy may differ.
            for i, ((wt, wl, wtop), (ct, cl, ctop)) in enumerate(zip(warm_lp, cold_lp)):
                for token, lp in ctop.items():
                    self.assertIn(token, wtop, f"step {i}")
                    self.assertLess(abs(wtop[token] - lp), 2e-3, f"step {i} token {token!r}")
                ranked = sorted(ctop.values(), reverse=True)
                if len(ranked) > 1 and ranked[0] - ranked[1] < 1e-3:
                    break
                self.assertEqual(wt, ct, f"step {i}")
            print(f"\ncompared {i + 1} steps, cached {cached}", file=sys.stderr)
            # The same request again on the warm server resumes almost entirely.
            again, again_lp = top_logprobs(warm, body)
            self.assertEqual(again["usage"]["prompt_tokens_details"]["cached_tokens"],
                             again["usage"]["prompt_tokens"] - 1)
            self.assertEqual([t for t, _, _ in again_lp], [t for t, _, _ in warm_lp])
        finally:
            warm.stop()
            cold.stop()

    def test_disk_cache_survives_a_restart(self):
        import tempfile
        with tempfile.TemporaryDirectory() as cache_dir:
            args = ("--cache-dir", cache_dir, "--cache-ram", "0", "--cache-disk", "64")
            long_prompt = "A long shared document about rivers. " * 20
            server = Server(*args)
            try:
                server.post("/v1/chat/completions", chat(long_prompt + "Q1"))
                # An unrelated prompt takes the only session; the first state is saved to disk.
                server.post("/v1/chat/completions", chat("Something else entirely."))
            finally:
                server.stop()
            self.assertTrue(any(f.endswith(".rlsnap") for f in os.listdir(cache_dir)))
            server = Server(*args)
            try:
                status, data = server.post("/v1/chat/completions", chat(long_prompt + "Q1"))
                self.assertEqual(status, 200)
                self.assertGreater(json.loads(data)["usage"]["prompt_tokens_details"]["cached_tokens"], 50)
            finally:
                server.stop()


class Shutdown(unittest.TestCase):
    def test_sigterm_ends_streams_with_an_error_event(self):
        server = Server()
        body = json.dumps(chat("Keep going", max_tokens=3000, stream=True, logit_bias=NO_END)).encode()
        s = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        received = s.recv(65536)
        self.assertIn(b"200 OK", received)
        server.proc.send_signal(signal.SIGTERM)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
        self.assertIn(b"shutting down", received)
        self.assertEqual(server.proc.wait(20), 0)
        s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
