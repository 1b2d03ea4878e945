"""A hostile `http:` validator on 127.0.0.1 for bench/hostile.sh.

`hostile_validator.py PORT MODE` answers every POST with 422 and
- `big`: a 300 MB body, its length announced;
- `bigchunked`: a 300 MB body, its length not announced (the connection closes at its end);
- `issues`: `{"issues": [...]}` with 200,000 issues (about 12 MB);
- `compact`: `{"issues": [...]}` with 200,000 one-letter issues (about 1 MB).
"""
import http.server, json, sys
port, mode = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if mode == "big":
            chunk = b"x" * (1 << 20)
            self.send_response(422); self.send_header("content-length", str(300 * len(chunk))); self.end_headers()
            try:
                for _ in range(300): self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError): pass
        elif mode == "bigchunked":
            chunk = b"x" * (1 << 20)
            self.send_response(422); self.send_header("connection", "close"); self.end_headers()
            try:
                for _ in range(300): self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError): pass
            self.close_connection = True
        elif mode == "compact":
            body = json.dumps({"issues": ["x"] * 200000}).encode()
            self.send_response(422); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
        else:
            body = json.dumps({"issues": [{"path": f"/items/{i}", "code": "bad", "message": f"item {i} is wrong"} for i in range(200000)]}).encode()
            self.send_response(422); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
