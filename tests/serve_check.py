"""Checks of a running `nmt serve` over real HTTP (Python's standard library
only). Usage: serve_check.py CHECK PORT [ARGS...]; exits non-zero with a
message naming what failed. Checks:

  api PORT SRC REF      every endpoint, its errors and limits; SRC's lines one
                        request each (JSON, forms, lists) must give REF's lines
  concurrent PORT SRC REF  SRC's lines from 32 threads at once, grouped at
                        random into requests, must give REF's lines (and share
                        windows)
  keys PORT KEY         API keys: 403 without or with a wrong one
  limits PORT           queue and time limits answer 429 and 503
  inflight PORT N OUT   N requests at once; their answers written to OUT
  cors PORT ORIGIN      CORS headers ("" : none)
  alternatives PORT N   a server with --n-best N gives up to N-1 alternatives
  burst PORT PID        64 clients connecting while the server is stopped
                        (SIGSTOP) all complete their handshakes: the listen
                        backlog holds them, none waits for the kernel's retries
"""
import json
import os
import random
import select
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

PORT = 0


def fail(what):
    print("FAIL: " + what, file=sys.stderr)
    sys.exit(1)


def call(method, path, body=None, ctype=None, headers=None):
    """(status, parsed JSON or text, headers) of one request."""
    data = None
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        data, h["Content-Type"] = json.dumps(body).encode(), "application/json"
    elif isinstance(body, str):
        data = body.encode()
        h["Content-Type"] = ctype or "application/x-www-form-urlencoded"
    elif isinstance(body, bytes):
        data = body
        if ctype:
            h["Content-Type"] = ctype
    rq = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=data, method=method,
                                headers=h)
    try:
        with urllib.request.urlopen(rq, timeout=60) as r:
            status, raw, hdrs = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, hdrs = e.code, e.read(), e.headers
    text = raw.decode("utf-8")
    if hdrs.get("Content-Type", "").startswith("application/json"):
        return status, json.loads(text), hdrs
    return status, text, hdrs


def expect_error(status, key, path, body=None, ctype=None, headers=None, method="POST",
                 contains=""):
    got, j, _ = call(method, path, body, ctype, headers)
    if got != status or not isinstance(j, dict) or key not in j or contains not in j[key]:
        fail(f"{method} {path} {str(body)[:80]!r}: expected {status} with {key!r} "
             f"containing {contains!r}, got {got} {j!r}")


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def translate_one(q, i):
    """q through one of the request shapes, chosen by i."""
    shape = i % 4
    if shape == 0:
        s, j, _ = call("POST", "/translate", {"q": q, "source": "en", "target": "de"})
        return s, j.get("translatedText")
    if shape == 1:
        s, j, _ = call("POST", "/translate",
                       urllib.parse.urlencode({"q": q, "source": "en", "target": "de"}))
        return s, j.get("translatedText")
    if shape == 2:
        s, j, _ = call("POST", "/translate", {"q": [q], "source": "en", "target": "de"})
        return s, (j.get("translatedText") or [None])[0]
    s, j, _ = call("POST", "/v2/translate", urllib.parse.urlencode({"text": q, "target_lang": "DE"}))
    return s, (j.get("translations") or [{}])[0].get("text")


def multipart(fields):
    b = "nmtboundary7"
    body = "".join(f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                   for k, v in fields)
    return (body + f"--{b}--\r\n").encode(), f"multipart/form-data; boundary={b}"


def raw_exchange(payload, wait_s=0.0, read=True):
    """Sends bytes on a fresh connection; what comes back before it closes."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    s.sendall(payload)
    if wait_s:
        time.sleep(wait_s)
    out = b""
    if read:
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    s.close()
    return out


def check_api(src, ref):
    s, j, _ = call("GET", "/health")
    if s != 200 or j.get("status") != "ok":
        fail(f"/health: {s} {j}")
    s, j, _ = call("GET", "/languages")
    if s != 200 or j != [{"code": "en", "name": "English", "targets": ["de"]}]:
        fail(f"/languages: {s} {j}")
    s, j, _ = call("GET", "/frontend/settings")
    if s != 200 or j.get("charLimit") != 2000 or j.get("keyRequired") is not False:
        fail(f"/frontend/settings: {s} {j}")
    s, j, _ = call("GET", "/v2/languages?type=target")
    if s != 200 or [l["language"] for l in j] != ["DE"]:
        fail(f"/v2/languages: {s} {j}")
    # Every line, one request each, in each shape: the translation nmt
    # translate writes for it.
    for i, (q, want) in enumerate(zip(src, ref)):
        s, got = translate_one(q, i)
        if s != 200 or got != want:
            fail(f"line {i + 1} (shape {i % 4}): {s} {got!r}, nmt translate wrote {want!r}")
    # A list, a form's repeated fields, multipart; a text of several lines.
    s, j, _ = call("POST", "/translate", {"q": src[:3], "source": "en", "target": "de"})
    if j.get("translatedText") != ref[:3]:
        fail(f"q as a list: {j}")
    s, j, _ = call("POST", "/translate", urllib.parse.urlencode(
        [("q", src[0]), ("q", src[1]), ("source", "en"), ("target", "de")]))
    if j.get("translatedText") != ref[:2]:
        fail(f"a form's repeated q: {j}")
    body, ctype = multipart([("q", src[4]), ("source", "en"), ("target", "de")])
    s, j, _ = call("POST", "/translate", body, ctype)
    if s != 200 or j.get("translatedText") != ref[4]:
        fail(f"multipart: {s} {j}")
    s, j, _ = call("POST", "/translate", {"q": src[0] + "\n\n" + src[1], "source": "en",
                                          "target": "de"})
    if j.get("translatedText") != ref[0] + "\n\n" + ref[1]:
        fail(f"lines kept: {j}")
    s, j, _ = call("POST", "/translate", {"q": src[0], "source": "auto", "target": "de",
                                          "alternatives": 2})
    if (j.get("translatedText") != ref[0] or j.get("detectedLanguage", {}).get("language") != "en"
            or not isinstance(j.get("alternatives"), list)):
        fail(f"auto and alternatives: {j}")
    s, j, _ = call("POST", "/translate", {"q": [], "source": "en", "target": "de"})
    if s != 200 or j.get("translatedText") != []:
        fail(f"an empty list: {s} {j}")
    # HTML keeps its markup; DeepL's tag_handling too.
    s, j, _ = call("POST", "/translate", {"q": "<p>A <b>dog</b> runs.</p>", "source": "en",
                                          "target": "de", "format": "html"})
    out = j.get("translatedText", "")
    if s != 200 or not out.startswith("<p>") or "<b>" not in out or not out.endswith("</p>"):
        fail(f"html: {s} {j}")
    s, j, _ = call("POST", "/v2/translate", {"text": ["<i>Hi</i> there."], "target_lang": "DE",
                                             "source_lang": "EN", "tag_handling": "html"})
    if s != 200 or "<i>" not in j["translations"][0]["text"]:
        fail(f"DeepL html: {s} {j}")
    s, j, _ = call("GET", "/v2/usage")
    if s != 200 or not 0 < j["character_count"] < j["character_limit"]:
        fail(f"/v2/usage: {s} {j}")
    check_errors()
    check_bad_clients()
    s, text, _ = call("GET", "/metrics")
    for name in ("nmt_requests_total{endpoint=\"/translate\",code=\"200\"}",
                 "nmt_requests_total{endpoint=\"/translate\",code=\"400\"}",
                 "nmt_sentences_total", "nmt_queue_texts 0",
                 "nmt_request_duration_seconds_bucket{le=\"+Inf\"}"):
        if name not in text:
            fail(f"/metrics lacks {name}:\n{text}")


def check_errors():
    T = "/translate"
    expect_error(400, "error", T, {"source": "en", "target": "de"}, contains="missing q")
    expect_error(400, "error", T, {"q": "x", "target": "de"}, contains="missing source")
    expect_error(400, "error", T, {"q": "x", "source": "en"}, contains="missing target")
    expect_error(400, "error", T, "q=x&source=en", contains="missing target")
    expect_error(400, "error", T, {"q": 5.5, "source": "en", "target": "de"}, contains="q")
    expect_error(400, "error", T, {"q": ["a", 3], "source": "en", "target": "de"})
    expect_error(400, "error", T, b"{not json", "application/json", contains="not valid JSON")
    expect_error(400, "error", T, b"[1,2]", "application/json", contains="JSON object")
    expect_error(400, "error", T, {"q": "x", "source": "en", "target": "fr"},
                 contains="fr is not supported")
    expect_error(400, "error", T, {"q": "x", "source": "xx", "target": "de"},
                 contains="xx is not supported")
    expect_error(400, "error", T, {"q": "x", "source": "en", "target": "de", "format": "xml"},
                 contains="format")
    expect_error(400, "error", T, {"q": "x", "source": "en", "target": "de", "alternatives": -1},
                 contains="alternatives")
    expect_error(400, "error", T, {"q": ["x"] * 51, "source": "en", "target": "de"},
                 contains="text limit (50)")
    expect_error(400, "error", T, {"q": "é" * 2001, "source": "en", "target": "de"},
                 contains="character limit (2000)")
    expect_error(413, "error", T, {"q": "x" * 200000, "source": "en", "target": "de"},
                 contains="exceeds the limit")
    expect_error(404, "error", "/nothing", method="GET", contains="Not found")
    expect_error(405, "error", T, method="GET")
    expect_error(405, "error", T, method="PUT")
    expect_error(400, "message", "/v2/translate", {"target_lang": "DE"}, contains="text")
    expect_error(400, "message", "/v2/translate", {"text": ["x"]}, contains="target_lang")
    expect_error(400, "message", "/v2/translate", {"text": ["x"], "target_lang": "FR"})
    expect_error(400, "message", "/v2/translate",
                 {"text": ["x"], "target_lang": "DE", "tag_handling": "xml"})
    expect_error(413, "message", "/v2/translate", "text=" + "x" * 200000 + "&target_lang=DE")


def check_bad_clients():
    # Garbage, a request cut short, a client that says it sends more than it
    # does and goes away, one that stalls past the timeout, invalid UTF-8:
    # answered or dropped, and the server serves on.
    raw_exchange(b"\x00\xff garbage \r\n\r\n")
    raw_exchange(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                 b"Content-Type: application/json\r\n\r\n{\"q\":", read=False)
    raw_exchange(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 50\r\n\r\n{\"q\":\"x\"}", read=False)
    t0 = time.time()
    got = raw_exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never ends its headers
    if time.time() - t0 > 20:
        fail("a client that stalls is not timed out")
    body = b'{"q":"A \xff\xfe dog.","source":"en","target":"de"}'
    s, j, _ = call("POST", "/translate", body, "application/json")
    if s != 400:  # not valid JSON: JSON is UTF-8
        fail(f"invalid UTF-8 in JSON: {s} {j}")
    s, j, _ = call("POST", "/translate", b"q=A%FF%FE+dog.&source=en&target=de",
                   "application/x-www-form-urlencoded")
    if s != 200 or not isinstance(j.get("translatedText"), str):
        fail(f"invalid UTF-8 in a form: {s} {j}")
    s, j, _ = call("GET", "/health")
    if s != 200:
        fail("the server stopped answering after bad clients")


def check_concurrent(src, ref):
    before = metric("nmt_windows_total")
    order = list(range(len(src)))
    random.Random(7).shuffle(order)
    groups, k = [], 0
    while k < len(order):
        n = random.Random(k).randint(1, 3)
        groups.append(order[k:k + n])
        k += n
    errors, lock = [], threading.Lock()

    def worker(mine):
        for g in mine:
            s, j, _ = call("POST", "/translate", {"q": [src[i] for i in g], "source": "en",
                                                  "target": "de"})
            got = j.get("translatedText") if s == 200 else None
            for n, i in enumerate(g):
                if got is None or got[n] != ref[i]:
                    with lock:
                        errors.append((i, s, got, ref[i]))

    threads = [threading.Thread(target=worker, args=(groups[t::32],)) for t in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        fail(f"{len(errors)} lines differ under concurrency, e.g. {errors[0]}")
    windows = metric("nmt_windows_total") - before
    if windows >= len(groups):
        fail(f"{len(groups)} concurrent requests took {windows} windows: none shared a batch")
    print(f"concurrent: {len(groups)} requests of {len(src)} lines in {windows} windows")


def metric(name):
    _, text, _ = call("GET", "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    fail(f"/metrics lacks {name}")


def check_keys(key):
    q = {"q": "A dog.", "source": "en", "target": "de"}
    expect_error(403, "error", "/translate", q, contains="API key")
    expect_error(403, "error", "/translate", dict(q, api_key=key + "x"), contains="Invalid API key")
    expect_error(403, "error", "/translate", dict(q, api_key=key[:-1]), contains="Invalid API key")
    s, j, _ = call("POST", "/translate", dict(q, api_key=key))
    if s != 200:
        fail(f"the right key: {s} {j}")
    s, j, _ = call("POST", "/translate", urllib.parse.urlencode(dict(q, api_key=key)))
    if s != 200:
        fail(f"the right key in a form: {s} {j}")
    d = {"text": ["A dog."], "target_lang": "DE"}
    expect_error(403, "message", "/v2/translate", d)
    expect_error(403, "message", "/v2/translate", d,
                 headers={"Authorization": "DeepL-Auth-Key wrong"})
    s, j, _ = call("POST", "/v2/translate", d, headers={"Authorization": "DeepL-Auth-Key " + key})
    if s != 200:
        fail(f"DeepL's header with the right key: {s} {j}")
    s, j, _ = call("GET", "/languages")
    if s != 200:
        fail("/languages needs no key")
    s, j, _ = call("GET", "/frontend/settings")
    if j.get("keyRequired") is not True:
        fail(f"settings do not say a key is required: {j}")


def check_limits():
    # --max-queue 2: three texts at once never fit; --timeout 1e-6: every
    # translation is late. Both answered in LibreTranslate's shape, and the
    # server serves on.
    expect_error(429, "error", "/translate", {"q": ["a", "b", "c"], "source": "en",
                                              "target": "de"}, contains="try again")
    expect_error(503, "error", "/translate", {"q": "A dog.", "source": "en", "target": "de"},
                 contains="did not finish")
    s, _, _ = call("GET", "/health")
    if s != 200:
        fail("the server stopped answering after its limits")


def check_inflight(n, out):
    results = [None] * n

    def one(i):
        try:
            results[i] = call("POST", "/translate", {"q": ["A man in a blue shirt is cleaning "
                                                           "the windows of a tall building."] * 20,
                                                     "source": "en", "target": "de"})[0]
        except Exception as e:  # noqa: BLE001 - written for the test to see
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        f.write(" ".join(str(r) for r in results) + "\n")


def check_cors(origin):
    _, _, h = call("GET", "/health")
    got = h.get("Access-Control-Allow-Origin")
    if (got or "") != origin:
        fail(f"Access-Control-Allow-Origin: {got!r}, expected {origin!r}")
    rq = urllib.request.Request(f"http://127.0.0.1:{PORT}/translate", method="OPTIONS")
    try:
        status = urllib.request.urlopen(rq, timeout=10).status
    except urllib.error.HTTPError as e:
        status = e.code
    if status != (204 if origin else 405):
        fail(f"OPTIONS: {status}")


def check_alternatives(n):
    """A server with --n-best N: up to N-1 alternatives, as many as asked."""
    q = {"q": "A man is riding a bike.", "source": "en", "target": "de"}
    s, j, _ = call("POST", "/translate", q)
    if s != 200 or "alternatives" in j:
        fail(f"no alternatives asked: {s} {j}")
    for asked in (1, n - 1, n + 3):
        s, j, _ = call("POST", "/translate", dict(q, alternatives=asked))
        alts = j.get("alternatives")
        if (s != 200 or not isinstance(alts, list) or len(alts) != min(asked, n - 1)
                or not all(isinstance(a, str) for a in alts)):
            fail(f"alternatives {asked} with --n-best {n}: {s} {j}")
    s, j, _ = call("POST", "/translate", dict(q, q=["A dog.", "A cat."], alternatives=1))
    alts = j.get("alternatives")
    if s != 200 or not isinstance(alts, list) or [len(a) for a in alts] != [1, 1]:
        fail(f"alternatives of a list: {s} {j}")


def check_burst(pid, n=64):
    # With the server stopped nothing is accepted, so what completes its
    # handshake is what the listen backlog holds; a backlog of 5 (httplib's)
    # held 6, and the rest waited a second or more for SYN retries.
    os.kill(pid, signal.SIGSTOP)
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", PORT))
            socks.append(s)
        pending, deadline = set(socks), time.time() + 0.5
        while pending and time.time() < deadline:
            _, writable, _ = select.select([], list(pending), [], 0.05)
            pending -= {s for s in writable if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0}
    finally:
        os.kill(pid, signal.SIGCONT)
    if pending:
        fail(f"{len(pending)} of {n} connections made while the server was stopped were not held by "
             "the listen backlog")
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    for s in socks:
        s.setblocking(True)
        s.settimeout(30)
        s.sendall(request)
    for s in socks:
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        s.close()
        if not answer.startswith(b"HTTP/1.1 200"):
            fail(f"a held connection was answered {answer[:60]!r}")


def main():
    global PORT
    check, PORT = sys.argv[1], int(sys.argv[2])
    args = sys.argv[3:]
    if check in ("api", "concurrent"):
        src, ref = lines(args[0]), lines(args[1])
        (check_api if check == "api" else check_concurrent)(src, ref)
    elif check == "keys":
        check_keys(args[0])
    elif check == "limits":
        check_limits()
    elif check == "inflight":
        check_inflight(int(args[0]), args[1])
    elif check == "cors":
        check_cors(args[0])
    elif check == "alternatives":
        check_alternatives(int(args[0]))
    elif check == "burst":
        check_burst(int(args[0]))
    else:
        fail("unknown check " + check)


if __name__ == "__main__":
    main()
