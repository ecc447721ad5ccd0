"""Clients that connect to `nmt serve` all at once: ROUNDS times, N new
connections (Connection: close) open together and each sends one short
sentence. A listen backlog too small for the burst drops connections that
then wait for the kernel's retries (1, 3, 7 s); printed: the requests, how
many took over 0.9 s, the slowest, and any that failed.
Usage: serve_burst.py PORT [N] [ROUNDS]
"""
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
N = int(sys.argv[2]) if len(sys.argv) > 2 else 128
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
BODY = b'{"q":"A dog runs.","source":"en","target":"de"}'
REQUEST = (b"POST /translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           b"Connection: close\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
times, failed = [], []
lock = threading.Lock()


def client(start):
    start.wait()
    t = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=60) as s:
            s.sendall(REQUEST)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        ok = answer.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    with lock:
        (times if ok else failed).append(time.perf_counter() - t)


for _ in range(ROUNDS):
    start = threading.Event()
    clients = [threading.Thread(target=client, args=(start,)) for _ in range(N)]
    for c in clients:
        c.start()
    start.set()
    for c in clients:
        c.join()
    time.sleep(0.5)
slow = sum(t > 0.9 for t in times)
print(f"{N} clients connecting at once, {ROUNDS} rounds: {len(times)} answered, {slow} over 0.9 s, "
      f"slowest {max(times, default=0):.2f} s, {len(failed)} failed")
