"""Starts a real redlite-server on a free loopback port for a test and stops it with SIGTERM,
checking that it exits cleanly (standard library only). The binary and model come from the
environment (set by CTest): REDLITE_SERVER and REDLITE_MODEL."""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, *extra_args):
        binary = os.environ["REDLITE_SERVER"]
        model = os.environ["REDLITE_MODEL"]
        args = [binary, "-m", model, "--host", "127.0.0.1", "--port", "0", "-t", "1", *extra_args]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.log = ""
        self.port = None
        found = threading.Event()

        def read_log():
            for line in iter(self.proc.stderr.readline, b""):
                self.log += line.decode("utf-8", "replace")
                m = re.search(r"listening on http://[^:]+:(\d+)", self.log)
                if m and not found.is_set():
                    self.port = int(m.group(1))
                    found.set()

        threading.Thread(target=read_log, daemon=True).start()
        if not found.wait(60):
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + self.log)
        for _ in range(100):
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """Returns (status, headers, body bytes). body: dict/list (sent as JSON) or bytes."""
        c = self.connection(timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def post(self, path, body, headers=None, timeout=60):
        status, _, data = self.request("POST", path, body, headers, timeout)
        return status, data

    def get(self, path):
        status, _, data = self.request("GET", path)
        return status, data

    def health(self):
        return json.loads(self.get("/health")[1])

    def wait_idle(self, seconds=5.0):
        end = time.time() + seconds
        while time.time() < end:
            h = self.health()
            if h["slots_busy"] == 0 and h["queued"] == 0:
                return True
            time.sleep(0.02)
        return False

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise RuntimeError("server did not stop within 20 s after SIGTERM\n" + self.log)
        else:
            code = self.proc.returncode
        if code != 0:
            raise RuntimeError(f"server exited with {code}\n" + self.log)


def sse_events(data):
    """(event name or None, parsed data or the raw string) for each SSE event."""
    events = []
    for block in data.decode("utf-8").split("\n\n"):
        name, payload = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        if payload is None:
            continue
        try:
            events.append((name, json.loads(payload)))
        except json.JSONDecodeError:
            events.append((name, payload))
    return events


def chat(content, **extra):
    body = {"model": "tiny-f32", "messages": [{"role": "user", "content": content}],
            "max_tokens": 8, "temperature": 0}
    body.update(extra)
    return body
