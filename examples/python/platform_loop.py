#!/usr/bin/env python3
"""An agent platform's loop against awaken's HTTP api, with the standard library only.

It lists the tools (when the server offers GET /v1/tools), submits the model's tool calls
as a batch and waits for the results; when a call needs a human, it finds the open
approval ticket, approves it, and reads the batch's results from the run's result stream;
then it submits the next step and gets its results in the same request.

    python3 examples/python/platform_loop.py --url http://127.0.0.1:8080 [--token TOKEN]

The token can also come from AWAKEN_API_TOKEN. The batch uses the tools of
examples/awaken.yaml (echo, ask_me, counter), which `awaken dev` loads by default.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid


class AwakenError(Exception):
    """A refusal of the api: HTTP status, machine-readable code, human message."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Awaken:
    """A small client of awaken's HTTP api (the /v1 routes)."""

    def __init__(self, base_url, token=None, timeout=90):
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method, path, body=None, headers=None, timeout=None):
        data = None
        hdrs = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            # Every mutating request must be application/json (the api's cross-site rule).
            hdrs["Content-Type"] = "application/json"
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        hdrs.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, headers=hdrs, method=method)
        return urllib.request.urlopen(req, timeout=timeout or self.timeout)

    def _json(self, method, path, body=None, timeout=None):
        """Sends a request and returns (status, decoded body); raises AwakenError >= 400."""
        try:
            with self._request(method, path, body, timeout=timeout) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            try:
                e = json.load(err)
            except ValueError:
                e = {}
            raise AwakenError(err.code, e.get("code", "unknown"), e.get("message", err.reason)) from None

    def list_tools(self):
        """The tools the server registers, or None when it has no GET /v1/tools."""
        try:
            _, body = self._json("GET", "/v1/tools")
        except AwakenError as err:
            if err.status == 404:
                return None
            raise
        return body.get("tools", body)

    def submit(self, submission, wait=None):
        """Submits a batch. Without wait: returns {"batch_id"} once stored (202). With wait
        (seconds, at most 60): returns {"batch_id","results","finalized"} when the batch
        was published in time, else {"batch_id","status":"pending"}. A refusal raises
        AwakenError: 400 for a malformed batch, 409 (with wait) for a conflict."""
        path = "/v1/batches"
        if wait is not None:
            path += "?wait=%gs" % wait
        _, body = self._json("POST", path, submission, timeout=self.timeout + (wait or 0))
        return body

    def results(self, batch_id):
        """The published results of a batch, or None while it is pending."""
        status, body = self._json("GET", "/v1/batches/%s/results" % batch_id)
        return body if status == 200 else None

    def tickets(self):
        _, body = self._json("GET", "/v1/tickets")
        return body["tickets"]

    def approve(self, correlation_id, note="", digest=None):
        # digest: the ticket's arguments_digest, binding the approval to the arguments
        # that were shown (409 digest_mismatch if the ticket's are other ones)
        body = {"note": note}
        if digest:
            body["arguments_digest"] = digest
        _, body = self._json("POST", "/v1/tickets/%s/approve" % correlation_id, body)
        return body

    def follow_run(self, run_id, last_event_id=None):
        """Yields (event id, batch) for every published batch of the run, in order, from
        the server-sent events of GET /v1/runs/{run_id}/results. Pass the last event id
        you handled to resume after it on a new connection."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        with self._request("GET", "/v1/runs/%s/results" % run_id, headers=headers) as resp:
            event, data, ev_id = None, [], None
            for raw in resp:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if event == "batch" and data:
                        yield ev_id, json.loads("\n".join(data))
                    event, data = None, []
                elif line.startswith(":"):
                    continue  # a comment: the server's keep-alive
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        event = value
                    elif field == "data":
                        data.append(value)
                    elif field == "id":
                        ev_id = value


def print_results(batch):
    for r in batch["results"]:
        text = "".join(b.get("text", "") for b in r["output"]["content"] if b.get("type") == "text")
        print("result %s %s %s: %s" % (r["call_id"], r["tool_id"], r["outcome"], text))


def wait_for_ticket(client, run_id, timeout=60):
    deadline = time.monotonic() + timeout
    delay = 0.05
    while time.monotonic() < deadline:
        for t in client.tickets():
            if t["run_id"] == run_id:
                return t
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
    raise TimeoutError("no approval ticket opened for run %s" % run_id)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("AWAKEN_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--token", default=os.environ.get("AWAKEN_API_TOKEN"))
    ap.add_argument("--run-id", default="py-%d-%s" % (time.time(), uuid.uuid4().hex[:8]),
                    help="a fresh id per run of this script: a batch id is submitted once")
    args = ap.parse_args()
    client = Awaken(args.url, args.token)
    run = args.run_id

    tools = client.list_tools()
    if tools is None:
        print("tools: GET /v1/tools is not served by this api (404); skipping the tool list")
    else:
        print("tools: " + ", ".join(t["id"] if isinstance(t, dict) else str(t) for t in tools))

    # Step 1: the model asked for three calls; ask_me needs a human's approval.
    step1 = {
        "run_id": run, "thread_id": "thread-" + run, "step": 1,
        "agent": {"snapshot_id": "snap-1", "tools": ["echo", "ask_me", "counter"]},
        "calls": [
            {"call_id": "c1", "tool_id": "echo", "arguments": {"text": "hello from python"}},
            {"call_id": "c2", "tool_id": "ask_me", "arguments": {"why": "the platform asks"}},
            {"call_id": "c3", "tool_id": "counter", "arguments": {"name": run}},
        ],
    }
    # A refusal that needs no state is answered at once, with the batcher's code.
    try:
        client.submit(dict(step1, calls=[]))
    except AwakenError as err:
        print("refused as expected: %d %s" % (err.status, err.code))

    reply = client.submit(step1, wait=2)
    batch_id = reply["batch_id"]
    if "results" in reply:
        print("submitted %s: published at once" % batch_id)
        print_results(reply)
    else:
        print("submitted %s: %s" % (batch_id, reply["status"]))
        ticket = wait_for_ticket(client, run)
        print("ticket %s: %s wants %s" % (ticket["correlation_id"], ticket["call_id"], ticket["tool_id"]))
        res = client.approve(ticket["correlation_id"], note="approved by the python example",
                             digest=ticket.get("arguments_digest"))
        print("approved %s: %s" % (ticket["correlation_id"], res["code"]))
        # The run's result stream delivers the batch once it is published.
        for event_id, batch in client.follow_run(run):
            if batch["batch_id"] == batch_id:
                print("stream: batch %s (event id %s)" % (batch_id, event_id))
                break
        print_results(client.results(batch_id))

    # Step 2: the next model turn, submitted and answered in one request.
    step2 = {
        "run_id": run, "thread_id": "thread-" + run, "step": 2,
        "agent": {"snapshot_id": "snap-1", "tools": ["echo"]},
        "calls": [{"call_id": "c4", "tool_id": "echo", "arguments": {"text": "step two"}}],
    }
    reply = client.submit(step2, wait=30)
    if "results" not in reply:
        raise SystemExit("step 2 still pending after 30s")
    print("submitted %s: published" % reply["batch_id"])
    print_results(reply)
    print("done")


if __name__ == "__main__":
    try:
        main()
    except AwakenError as err:
        print("awaken: %s" % err, file=sys.stderr)
        sys.exit(1)
