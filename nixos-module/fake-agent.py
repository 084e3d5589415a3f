"""A stand-in OpenAI-compatible endpoint for the NixOS VM test (test.nix).

Answers POST .../chat/completions with one fixed structured verdict, as
JSON or, when the request asks to stream, as server-sent events. Each
request's path, Authorization header and model are appended to LOG as one
JSON line, so the test can check what the Agent worker sent.

    python3 fake-agent.py PORT LOG
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERDICT = json.dumps({"verdict": "approve", "concerns": []})


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        with open(sys.argv[2], "a") as log:
            log.write(
                json.dumps(
                    {
                        "path": self.path,
                        "authorization": self.headers.get("authorization"),
                        "model": body.get("model"),
                    }
                )
                + "\n"
            )
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for chunk in (
                {"choices": [{"delta": {"role": "assistant", "content": VERDICT}, "finish_reason": None}]},
                {"choices": [{"delta": {}, "finish_reason": "stop"}]},
            ):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return
        reply = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": VERDICT},
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
