"""A soak of `nmt serve`: REQUESTS requests from THREADS clients on raw
sockets, each drawn at random: valid LibreTranslate and DeepL requests
(JSON, forms, lists, HTML), invalid ones (bad JSON, missing fields, unknown
languages, wrong methods and paths, bodies over the limit, garbage that is
not HTTP), and clients that vanish mid-request or before reading the answer.
Every request that is answered must be answered in full with the status its
kind expects (200 for valid ones, 4xx for invalid ones, 429/503 allowed
under overload); a valid request never goes unanswered. Prints the counts;
exits 1 on any failure.
Usage: serve_soak.py PORT [REQUESTS] [THREADS]
"""
import collections
import json
import random
import socket
import sys
import threading

PORT = int(sys.argv[1])
TOTAL = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 16
WORDS = ("a man woman dog cat child runs walks sits on the in street park water red blue big "
         "small two three people playing ball with near under").split()


def sentence(r):
    return " ".join(r.choice(WORDS) for _ in range(r.randint(1, 12))).capitalize() + "."


def http(method, path, body=b"", ctype="application/json", extra=""):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}"
    if body or method == "POST":
        head += f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def draw(r):
    """(kind, bytes to send, statuses allowed, how the client behaves)."""
    k = r.random()
    q = sentence(r)
    if k < 0.35:
        b = json.dumps({"q": q, "source": "en", "target": "de"}).encode()
        return "valid json", http("POST", "/translate", b), {200}, "full"
    if k < 0.45:
        b = f"q={q.replace(' ', '+')}&source=en&target=de".encode()
        return "valid form", http("POST", "/translate", b, "application/x-www-form-urlencoded"), \
            {200}, "full"
    if k < 0.52:
        b = json.dumps({"q": [sentence(r) for _ in range(r.randint(1, 5))], "source": "auto",
                        "target": "de"}).encode()
        return "valid list", http("POST", "/translate", b), {200}, "full"
    if k < 0.57:
        b = json.dumps({"text": [q], "target_lang": "DE", "tag_handling": "html"}).encode()
        return "valid deepl", http("POST", "/v2/translate", b), {200}, "full"
    if k < 0.60:
        return "valid get", http("GET", r.choice(["/health", "/languages", "/metrics", "/"])), \
            {200}, "full"
    if k < 0.66:
        b = r.choice([b"{bad", b"[]", b'{"q": 5}', b'{"q": "x"}', b'{"q":"x","source":"en"}',
                      b'{"q":"x","source":"xx","target":"de"}', b"\xff\xfe\x00",
                      b'{"q":"x","source":"en","target":"de","format":"pdf"}'])
        return "invalid body", http("POST", "/translate", b), {400}, "full"
    if k < 0.70:
        return "invalid route", http(r.choice(["PUT", "DELETE", "GET"]),
                                     r.choice(["/translate", "/nope", "/v2/x"])), \
            {400, 404, 405}, "full"
    if k < 0.73:
        b = b'{"q":"' + b"x" * 300000 + b'","source":"en","target":"de"}'
        # Over the character limit (400), or over the body limit (413).
        return "too large", http("POST", "/translate", b), {400, 413}, "full"
    if k < 0.78:
        return "garbage", bytes(r.getrandbits(8) for _ in range(r.randint(1, 200))) + \
            b"\r\n\r\n", {400, 404, 405, 413, 414, 0}, "full"
    if k < 0.86:
        b = json.dumps({"q": q, "source": "en", "target": "de"}).encode()
        data = http("POST", "/translate", b)
        return "vanish mid-request", data[:r.randint(1, len(data) - 1)], set(), "cut"
    b = json.dumps({"q": [sentence(r) for _ in range(3)], "source": "en", "target": "de"}).encode()
    return "vanish before answer", http("POST", "/translate", b), set(), "noread"


def exchange(data, how):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=120)
    try:
        s.sendall(data)
        if how != "full":
            return None
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out
    finally:
        s.close()


def status_of(reply):
    """The status of a complete answer; -1 if it is cut short."""
    if not reply:
        return 0
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and len(body) != int(value):
            return -1
    return status


counts = collections.Counter()
failures = []
lock = threading.Lock()


def client(seed, n):
    r = random.Random(seed)
    for _ in range(n):
        kind, data, allowed, how = draw(r)
        try:
            reply = exchange(data, how)
            got = status_of(reply) if how == "full" else None
        except (ConnectionResetError, BrokenPipeError):
            got = "reset"
        except Exception as e:  # noqa: BLE001 - counted as a failure below
            got = repr(e)
        with lock:
            counts[(kind, got)] += 1
            ok = how != "full" or got in allowed or (got in (429, 503) and "valid" in kind) or (
                got == "reset" and kind in ("garbage", "too large"))
            if not ok:
                failures.append((kind, got, data[:120]))


def main():
    per = TOTAL // THREADS
    threads = [threading.Thread(target=client, args=(t, per)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(counts.values())
    print(f"{total} requests from {THREADS} clients")
    for (kind, got), n in sorted(counts.items(), key=lambda x: (x[0][0], str(x[0][1]))):
        print(f"  {kind:22} {str(got):8} {n}")
    print(f"failures: {len(failures)}")
    for f in failures[:10]:
        print("  ", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
