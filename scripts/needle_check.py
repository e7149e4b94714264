#!/usr/bin/env python3
"""Long-context retrieval through a running redlite-server (Python standard library only).

For each prompt size it builds filler text with three passphrases hidden at different depths,
asks the model to repeat them, and prints prompt tokens, passphrases found, ingestion (prefill)
speed and decode speed:

    scripts/needle_check.py --url http://127.0.0.1:8080 --sizes 60000,125000,250000

Ingestion speed is the uncached prompt tokens over the time to the first streamed token;
decode speed is the generated tokens after the first over the time after it."""
import argparse
import http.client
import json
import random
import sys
import time
import urllib.parse

SUBJECTS = ["The river", "A lighthouse keeper", "The old library", "Every autumn the village",
            "The mountain pass", "A travelling merchant", "The harbour", "An orchard",
            "The night train", "A quiet workshop", "The northern road", "A small bakery"]
VERBS = ["remembers", "collects", "watches over", "follows", "describes", "waits for",
         "repairs", "sketches", "counts", "listens to", "measures", "gathers"]
OBJECTS = ["the colour of the evening sky", "stories told by sailors", "the first frost",
           "a map of forgotten trails", "the sound of distant bells", "letters from abroad",
           "the shape of the clouds", "seeds for the next spring", "the tide tables",
           "an unfinished song", "the weight of old coins", "footprints in the snow"]
WORDS = ["amber", "falcon", "cobalt", "willow", "granite", "ember", "saffron", "harbor",
         "juniper", "quartz", "meadow", "tundra", "violet", "cedar", "lantern", "orbit"]


class Client:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout

    def _conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get(self, path):
        c = self._conn()
        c.request("GET", path, headers=self.headers)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: HTTP {r.status}: {body[:300]!r}")
        return json.loads(body)

    def post(self, path, body):
        c = self._conn()
        c.request("POST", path, body=json.dumps(body), headers=self.headers)
        r = c.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit(f"POST {path}: HTTP {r.status}: {data[:300]!r}")
        return json.loads(data)

    def stream_chat(self, body):
        """Streams a chat completion; returns (text, usage, t_first_token, t_end) from t=0."""
        c = self._conn()
        start = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=self.headers)
        r = c.getresponse()
        if r.status != 200:
            sys.exit(f"chat: HTTP {r.status}: {r.read()[:300]!r}")
        text, usage, first = "", None, None
        while True:
            line = r.readline()
            if not line:
                break
            line = line.decode("utf-8").strip()
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            if payload == "[DONE]":
                break
            event = json.loads(payload)
            if "error" in event:
                sys.exit(f"chat: {event['error'].get('message')}")
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                delta = choice.get("delta", {})
                piece = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
                if piece and first is None:
                    first = time.perf_counter() - start
                text += piece
        return text, usage, first, time.perf_counter() - start


def filler_sentence(rng):
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}. "


def build_prompt(client, target_tokens, depths, rng):
    passphrases = [f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randint(10, 99)}" for _ in depths]
    sample = "".join(filler_sentence(rng) for _ in range(200))
    per_char = len(client.post("/tokenize", {"content": sample})["tokens"]) / len(sample)
    total_chars = int(target_tokens / per_char)
    needles = sorted(zip(depths, passphrases))
    text, placed = [], 0
    length = 0
    while length < total_chars:
        while placed < len(needles) and length >= needles[placed][0] * total_chars:
            s = f"Remember this: secret passphrase number {placed + 1} is {needles[placed][1]}. "
            text.append(s)
            length += len(s)
            placed += 1
        s = filler_sentence(rng)
        text.append(s)
        length += len(s)
    question = ("\n\nThe text above hides three secret passphrases. Reply with the three "
                "passphrases only, one per line.")
    return "".join(text) + question, passphrases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--model", default="", help="model name (default: the server's)")
    ap.add_argument("--sizes", default="60000,125000,250000",
                    help="comma-separated prompt sizes in tokens (approximate)")
    ap.add_argument("--depths", default="0.1,0.5,0.9",
                    help="where the passphrases go, as fractions of the prompt")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=36000, help="seconds per request")
    args = ap.parse_args()

    client = Client(args.url, args.api_key, args.timeout)
    models = client.get("/v1/models")["data"]
    model = args.model or models[0]["id"]
    context = models[0].get("context_length")
    depths = [float(d) for d in args.depths.split(",")]
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        rng = random.Random(args.seed * 1000003 + size)
        prompt, passphrases = build_prompt(client, size, depths, rng)
        body = {"model": model, "temperature": 0, "max_tokens": args.max_tokens, "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": prompt}]}
        n_prompt = len(client.post("/tokenize", {"content": prompt})["tokens"])
        if context and n_prompt + args.max_tokens > context:
            print(f"skipping {size}: the prompt is about {n_prompt} tokens, the server's context is "
                  f"{context} (start it with a larger --ctx)", file=sys.stderr)
            continue
        print(f"running {size} (about {n_prompt} prompt tokens)...", file=sys.stderr, flush=True)
        text, usage, first, end = client.stream_chat(body)
        found = sum(p in text for p in passphrases)
        prompt_tokens = usage["prompt_tokens"] if usage else n_prompt
        cached = usage["prompt_tokens_details"]["cached_tokens"] if usage else 0
        generated = usage["completion_tokens"] if usage else 0
        ingest = (prompt_tokens - cached) / first if first else float("nan")
        decode = (generated - 1) / (end - first) if first and generated > 1 and end > first else float("nan")
        rows.append((prompt_tokens, f"{found}/{len(passphrases)}", ingest, decode))
        print(f"  answer: {text.strip()[:200]!r}", file=sys.stderr)

    print("| prompt tokens | passphrases found | ingestion tok/s | decode tok/s |")
    print("| ---: | :---: | ---: | ---: |")
    for tokens, found, ingest, decode in rows:
        print(f"| {tokens} | {found} | {ingest:.1f} | {decode:.2f} |")


if __name__ == "__main__":
    main()
