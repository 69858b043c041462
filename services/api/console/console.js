// awaken console: pending approvals and recent batches, live over server-sent events.
//
// Safety rules of this file (checked by the Go tests):
//  - every piece of data is put on the page with textContent or as a text node; no string
//    is ever parsed as HTML (console_test.go lists the forbidden sinks);
//  - no string is ever evaluated as code, no inline handlers (the CSP forbids them anyway);
//  - the API token lives in sessionStorage and travels only in the Authorization header of
//    same-origin requests; there is no cookie, so no cross-site request can carry it.
"use strict";

(function () {
  const TOKEN_KEY = "awaken.apiToken";
  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    tickets: new Map(), // correlation_id -> ticket
    edits: new Map(), // correlation_id -> the text of its argument box, once edited
    tools: [], // the tool catalog (awaken format), each with paused and pause
    limits: null, // GET v1/limits: {limits, use, truncated}
    batches: [], // batch list views, newest first
    details: new Map(), // batch_id -> full view of an expanded batch
    expanded: new Set(),
    progress: new Map(), // batch_id + " " + call_id -> latest progress event of a running call
    progressTimer: 0,
    session: null, // {actor, roles} of the token (GET v1/session); null until read
    streamAbort: null,
    refreshTimer: 0,
    retryDelay: 1000,
    policyReport: null, // the last policy test's report
  };

  const $ = (id) => document.getElementById(id);

  // el builds an element; children are nodes or strings (strings become text nodes).
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === "text") node.textContent = String(v);
        else if (k === "className") node.className = v;
        else if (k === "dataset") Object.assign(node.dataset, v);
        else if (k === "onClick") node.addEventListener("click", v);
        else if (k === "onSubmit") node.addEventListener("submit", v);
        else node.setAttribute(k, String(v));
      }
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      node.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return node;
  }

  class HTTPError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(path, options) {
    const opts = Object.assign({ method: "GET" }, options || {});
    const headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = "Bearer " + state.token;
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(opts.body);
    }
    opts.headers = headers;
    opts.credentials = "same-origin";
    opts.cache = "no-store";
    const res = await fetch(path, opts);
    let body = null;
    try {
      body = await res.json();
    } catch (_) {
      body = null;
    }
    if (res.status === 401) {
      showLogin("Your token was refused. Sign in again.");
    }
    if (!res.ok) {
      const code = body && typeof body.code === "string" ? body.code : "http_" + res.status;
      const msg = body && typeof body.message === "string" ? body.message : res.statusText;
      throw new HTTPError(res.status, code, msg);
    }
    return body;
  }

  // ---- roles: the console shows only the controls the token may use (the api refuses
  // the others with 403 missing_role anyway) ----

  function can(role) {
    return !!(state.session && Array.isArray(state.session.roles) && state.session.roles.includes(role));
  }

  // approverKey is who an actor is for counting approvals, as the gate counts them: the
  // name before any " as {claim}", case-insensitive.
  function approverKey(actor) {
    return String(actor || "").trim().split(" as ")[0].trim().toLowerCase();
  }

  function approvedByMe(t) {
    if (!state.session) return false;
    const me = approverKey(state.session.actor);
    return (t.approvals || []).some((a) => approverKey(a.actor) === me);
  }

  async function loadSession() {
    state.session = await api("v1/session");
    const roles = (state.session.roles || []).join(", ") || "none";
    $("whoami").textContent = state.session.actor + " (" + roles + ")";
    $("whoami").hidden = false;
  }

  // ---- status line ----

  function setStatus(text, kind) {
    const s = $("status");
    s.textContent = text;
    s.className = "status " + (kind || "");
  }

  // ---- time formatting ----

  function age(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return "";
    let s = Math.max(0, Math.floor((Date.now() - t) / 1000));
    if (s < 60) return s + "s";
    let m = Math.floor(s / 60);
    s %= 60;
    if (m < 60) return m + "m " + s + "s";
    const h = Math.floor(m / 60);
    m %= 60;
    if (h < 48) return h + "h " + m + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function offset(fromIso, iso) {
    const d = Date.parse(iso) - Date.parse(fromIso);
    if (Number.isNaN(d)) return "";
    if (Math.abs(d) < 1000) return "+" + d + " ms";
    return "+" + (d / 1000).toFixed(d < 10000 ? 2 : 1) + " s";
  }

  function clock(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return "";
    return d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function prettyJSON(v) {
    try {
      return JSON.stringify(v, null, 2);
    } catch (_) {
      return String(v);
    }
  }

  // ---- tickets ----

  function waitingFor(t) {
    switch (t.reason) {
      case "permission":
        return t.deadline ? "approval (deadline " + new Date(t.deadline).toLocaleString() + ")" : "approval";
      case "scheduled_action":
        return t.due_at ? "schedule (due " + new Date(t.due_at).toLocaleString() + ")" : "schedule";
      case "client_execution":
        return "client result";
      default:
        return String(t.reason || "");
    }
  }

  // approvalInfo shows what binds an approval: the digest of the arguments (the console
  // sends it with the approval, so the gate refuses it if the ticket's arguments differ
  // from what is shown) and, for a ticket that needs several approvers, who has approved.
  function approvalInfo(t) {
    const parts = [];
    const need = t.approvals_required || 1;
    if (need > 1) {
      const names = (t.approvals || []).map((a) => a.actor);
      parts.push(el("div", { className: "approvals", text: "approvals " + names.length + " of " + need + (names.length ? ": " + names.join(", ") : "") }));
    }
    if (t.arguments_digest) {
      const d = String(t.arguments_digest);
      parts.push(el("div", { className: "digest muted", title: d, text: d.slice(0, "sha256:".length + 12) + "…" }));
    }
    return parts;
  }

  function renderTickets() {
    const list = Array.from(state.tickets.values()).sort(
      (a, b) => Date.parse(a.opened_at) - Date.parse(b.opened_at) || String(a.correlation_id).localeCompare(String(b.correlation_id)),
    );
    $("ticket-count").textContent = list.length ? "(" + list.length + ")" : "";
    $("no-tickets").hidden = list.length > 0;
    $("tickets").hidden = list.length === 0;
    $("edit-hint").hidden = list.length === 0;
    const rows = list.map(ticketRow);
    $("tickets").tBodies[0].replaceChildren(...rows);
  }

  // argumentsText is the text an argument box starts with: the proposed arguments, or what
  // the operator typed before the list was re-rendered.
  function argumentsText(t) {
    const typed = state.edits.get(t.correlation_id);
    return typed !== undefined ? typed : prettyJSON(t.arguments);
  }

  function ticketRow(t) {
    const decidable = t.reason === "permission" || t.reason === "scheduled_action";
    const actions = el("td", { className: "actions" });
    let argsCell;
    if (decidable && !can("approver")) {
      argsCell = el("td", null, el("pre", { className: "args", text: prettyJSON(t.arguments) }));
      actions.append(el("span", { className: "muted no-role", text: "view only (approver role needed)" }));
    } else if (decidable) {
      // The arguments are editable: approving sends the edit, which the gate validates
      // against the tool's schema and gates again. Set as a value, never parsed as HTML.
      const box = el("textarea", { className: "args", rows: "4", spellcheck: "false", "aria-label": "arguments of " + t.call_id + " (edit to approve with changes)" });
      box.value = argumentsText(t);
      box.addEventListener("input", () => state.edits.set(t.correlation_id, box.value));
      argsCell = el("td", null, box);
      const reason = el("input", { type: "text", placeholder: "reason for denying", "aria-label": "reason for denying", maxlength: "4096", required: true });
      const approve = el("button", { type: "button", className: "approve", text: "Approve" });
      const deny = el("button", { type: "submit", className: "deny", text: "Deny" });
      const form = el("form", { className: "deny-form" }, reason, deny);
      approve.addEventListener("click", () => decide(t, true, "", [approve, deny, reason, box], box.value));
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        decide(t, false, reason.value.trim(), [approve, deny, reason, box]);
      });
      if (approvedByMe(t)) {
        // A second approval by the same person would count nothing (duplicate_approver).
        actions.append(el("span", { className: "muted approved-by-me", text: "you approved" }), form);
      } else {
        actions.append(approve, form);
      }
    } else {
      argsCell = el("td", null, el("pre", { className: "args", text: prettyJSON(t.arguments) }));
      actions.append(el("span", { className: "muted", text: "answered by the client" }));
    }
    return el(
      "tr",
      { dataset: { correlation: t.correlation_id } },
      el("td", null, el("code", { text: t.tool_id })),
      argsCell,
      el("td", null, el("code", { text: t.run_id })),
      el("td", null, el("code", { text: t.call_id })),
      el("td", null, waitingFor(t), ...approvalInfo(t)),
      el("td", { className: "age", dataset: { since: t.opened_at }, text: age(t.opened_at) }),
      actions,
    );
  }

  // editedArguments reads an argument box for an approval of t: undefined when it still
  // holds the proposed arguments (approve as proposed), the parsed value otherwise; it
  // throws on text that is not JSON.
  function editedArguments(t, text) {
    const v = JSON.parse(text);
    return JSON.stringify(v) === JSON.stringify(t.arguments) ? undefined : v;
  }

  async function decide(t, allow, text, controls, argsText) {
    $("action-error").textContent = "";
    if (!allow && !text) {
      $("action-error").textContent = "Give a reason for denying " + t.tool_id + " (" + t.call_id + ").";
      return;
    }
    const body = allow ? { note: text } : { reason: text };
    // Bind the approval to the arguments shown: the gate refuses it (digest_mismatch)
    // if the ticket's arguments are not the ones this digest names.
    if (allow && t.arguments_digest) body.arguments_digest = t.arguments_digest;
    if (allow && argsText !== undefined) {
      try {
        const edited = editedArguments(t, argsText);
        if (edited !== undefined) body.arguments = edited;
      } catch (err) {
        $("action-error").textContent = "The arguments of " + t.tool_id + " (" + t.call_id + ") are not valid JSON: " + err.message;
        return;
      }
    }
    controls.forEach((c) => (c.disabled = true));
    const path = "v1/tickets/" + encodeURIComponent(t.correlation_id) + (allow ? "/approve" : "/deny");
    try {
      const res = await api(path, { method: "POST", body: body });
      if (res && res.code === "approval_recorded") {
        // Counted; the ticket stays open until the last approver.
        await refreshTickets();
        setStatus(res.message || "approval recorded", "ok");
        return;
      }
      state.tickets.delete(t.correlation_id);
      state.edits.delete(t.correlation_id);
      renderTickets();
      setStatus((res && res.message) || (allow ? "approved" : "denied"), "ok");
    } catch (err) {
      controls.forEach((c) => (c.disabled = false));
      if (err instanceof HTTPError && (err.code === "not_waiting" || err.code === "expired")) {
        state.tickets.delete(t.correlation_id);
        state.edits.delete(t.correlation_id);
        renderTickets();
      }
      $("action-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    }
  }

  // ---- tools (the kill switch) ----

  function renderTools() {
    const paused = state.tools.filter((t) => t.paused).length;
    $("paused-count").textContent = paused ? "(" + paused + " paused)" : "";
    $("tools").tBodies[0].replaceChildren(...state.tools.map(toolRow));
  }

  function toolRow(t) {
    const actions = el("td", { className: "actions" });
    let stateCell;
    const operator = can("operator");
    if (!operator) actions.append(el("span", { className: "muted no-role", text: "operator role needed" }));
    if (t.paused) {
      const p = t.pause || {};
      const who = [p.actor, p.paused_at ? new Date(p.paused_at).toLocaleString() : ""].filter(Boolean).join(", ");
      stateCell = el(
        "td",
        null,
        el("span", { className: "badge paused", text: "paused" }),
        p.reason ? el("div", { className: "pause-reason", text: p.reason }) : null,
        who ? el("div", { className: "muted", text: "by " + who }) : null,
      );
      const resume = el("button", { type: "button", className: "resume", text: "Resume" });
      resume.addEventListener("click", () => setPaused(t, false, "", [resume]));
      if (operator) actions.append(resume);
    } else {
      stateCell = el("td", null, el("span", { className: "badge active", text: "active" }));
      const reason = el("input", { type: "text", placeholder: "reason (shown to the model)", "aria-label": "reason for pausing", maxlength: "1024" });
      const pause = el("button", { type: "submit", className: "pause", text: "Pause" });
      const form = el("form", { className: "pause-form" }, reason, pause);
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        setPaused(t, true, reason.value.trim(), [reason, pause]);
      });
      if (operator) actions.append(form);
    }
    return el(
      "tr",
      { className: t.paused ? "paused" : "", dataset: { tool: t.id } },
      el("td", null, el("code", { text: t.id }), t.description ? el("div", { className: "muted", text: t.description }) : null),
      el("td", { text: t.target + (t.kind && t.kind !== "regular" ? " · " + t.kind : "") }),
      el("td", { text: t.capability }),
      stateCell,
      actions,
    );
  }

  async function setPaused(t, pause, reason, controls) {
    $("tools-error").textContent = "";
    controls.forEach((c) => (c.disabled = true));
    const path = "v1/tools/" + encodeURIComponent(t.id) + (pause ? "/pause" : "/resume");
    try {
      await api(path, { method: "POST", body: pause ? { reason: reason } : {} });
      setStatus(t.id + (pause ? " paused" : " resumed"), "ok");
      await refreshTools();
    } catch (err) {
      controls.forEach((c) => (c.disabled = false));
      $("tools-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    }
  }

  async function refreshTools() {
    if (!can("viewer") && !can("submitter") && !can("operator")) return;
    const body = await api("v1/tools");
    state.tools = body.tools || [];
    renderTools();
  }

  // ---- limits (GET v1/limits) ----

  function renderLimits() {
    const rep = state.limits;
    const section = $("limits-section");
    section.hidden = !rep || !rep.limits || rep.limits.length === 0;
    if (section.hidden) return;
    const rows = [];
    for (const l of rep.limits) {
      const uses = (rep.use || []).filter((u) => u.limit === l.name);
      const head = () => [
        el("td", null, el("code", { text: l.name }), l.shadow ? el("span", { className: "muted", text: " (shadow)" }) : null),
        el("td", { text: l.kind + (l.window ? " / " + l.window : "") + (l.over && l.over !== "block" ? " · over: " + l.over : "") }),
        el("td", { text: l.key }),
      ];
      if (uses.length === 0) {
        rows.push(el("tr", { dataset: { limit: l.name } }, ...head(), el("td", { className: "muted", text: "—" }),
          el("td", { text: "0 / " + l.max }), el("td", { text: "" })));
        continue;
      }
      for (const u of uses) {
        const full = u.used >= u.max;
        rows.push(el("tr", { className: full ? "paused" : "", dataset: { limit: l.name } }, ...head(),
          el("td", null, el("code", { text: u.value === "" ? "(none)" : u.value })),
          el("td", { text: u.used + " / " + u.max + (u.waiting ? " (" + u.waiting + " waiting)" : "") }),
          el("td", { text: u.window ? new Date(u.window).toLocaleString() : "" })));
      }
    }
    if (rep.truncated) rows.push(el("tr", null, el("td", { className: "muted", text: "… more keys than shown" })));
    $("limits").tBodies[0].replaceChildren(...rows);
  }

  async function refreshLimits() {
    if (!can("viewer")) return;
    try {
      state.limits = await api("v1/limits");
      $("limits-error").textContent = "";
    } catch (err) {
      $("limits-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    }
    renderLimits();
  }

  // ---- policy test ----

  // policyTime turns a since/until box into an RFC 3339 time, or undefined when empty.
  function policyTime(id) {
    const v = $(id).value.trim();
    if (!v) return undefined;
    const t = Date.parse(v);
    if (Number.isNaN(t)) throw new Error(id.replace("policy-", "") + ": not a time: " + v);
    return new Date(t).toISOString();
  }

  async function runPolicyTest(ev) {
    ev.preventDefault();
    $("policy-error").textContent = "";
    const button = $("policy-run");
    button.disabled = true;
    try {
      const runs = $("policy-runs").value.split(",").map((r) => r.trim()).filter(Boolean);
      const body = { config: $("policy-config").value, since: policyTime("policy-since"), until: policyTime("policy-until") };
      if (runs.length) body.runs = runs;
      state.policyReport = await api("v1/policy/test", { method: "POST", body: body });
      renderPolicyTest();
    } catch (err) {
      $("policy-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    } finally {
      button.disabled = false;
    }
  }

  function renderPolicyTest() {
    const rep = state.policyReport;
    if (!rep) return;
    $("policy-result").hidden = false;
    let summary = rep.total + " decisions replayed, " + rep.changed + " changed";
    if (rep.missing) summary += ", " + rep.missing + " not replayed";
    if (rep.oldest) summary += "; oldest " + new Date(rep.oldest).toLocaleString() + " (the audit stream's retention bounds the history)";
    $("policy-summary").textContent = summary;
    $("policy-rules").tBodies[0].replaceChildren(
      ...(rep.rules || []).map((r) =>
        el("tr", null, el("td", null, el("code", { text: r.rule }), r.shadow ? " (shadow)" : null), el("td", { text: r.calls }), el("td", { text: r.changed })),
      ),
    );
    const onlyChanged = $("policy-changed").checked;
    $("policy-calls").tBodies[0].replaceChildren(
      ...(rep.calls || [])
        .filter((c) => !onlyChanged || c.changed || c.missing)
        .map((c) =>
          el(
            "tr",
            { className: c.changed ? "changed" : "" },
            el("td", null, el("code", { text: c.batch_id })),
            el("td", null, el("code", { text: c.call_id })),
            el("td", null, el("code", { text: c.tool_id })),
            el("td", { title: c.old_reason || "", text: c.old }),
            el("td", { title: c.new_reason || "", text: c.new || "-" }),
            el("td", { text: c.missing ? "not replayed: " + c.missing : c.rule }),
          ),
        ),
    );
  }

  // ---- batches ----

  function renderBatches() {
    $("no-batches").hidden = state.batches.length > 0;
    $("batches").replaceChildren(...state.batches.map(batchBlock));
  }

  function batchBlock(b) {
    const open = state.expanded.has(b.batch_id);
    const details = el("details", { className: "batch phase-" + b.phase, dataset: { batch: b.batch_id } });
    details.open = open;
    details.addEventListener("toggle", () => {
      if (details.open) {
        state.expanded.add(b.batch_id);
        loadDetail(b.batch_id);
      } else {
        state.expanded.delete(b.batch_id);
      }
    });
    const summary = el(
      "summary",
      null,
      el("code", { text: b.batch_id }),
      " ",
      el("span", { className: "badge " + b.phase, text: b.phase }),
      " ",
      el("span", { className: "muted", text: b.terminal + "/" + b.calls.length + " calls terminal · " + new Date(b.created_at).toLocaleString() }),
    );
    const full = state.details.get(b.batch_id);
    const table = el(
      "table",
      { className: "calls" },
      el("thead", null, el("tr", null, ...["#", "Call", "Tool", "Phase", "Outcome", "Decided by", "Timeline"].map((h) => el("th", { text: h })))),
      el("tbody", null, ...b.calls.map((c) => callRow(b, c, full))),
    );
    details.append(summary, table);
    return details;
  }

  // actorCell shows who resolved the call's ticket. An actor no door authenticated (a
  // resume command on the public subject named it itself) is shown as a claim, marked
  // "(claimed)" and styled apart, never like the token or user of that name.
  function actorCell(c) {
    if (!c.actor && !c.actor_claimed) return el("td", { className: "actor", text: "" });
    let text = c.actor || "(unnamed)";
    if (c.actor_claimed) text += " (claimed)";
    if (c.edited) text += " (edited arguments)";
    const title = c.actor_claimed ? "named by the command's publisher; no door authenticated it" : "authenticated by the door it came through";
    return el("td", { className: c.actor_claimed ? "actor claimed" : "actor", title: title, text: text });
  }

  function callRow(b, c, full) {
    let phase = c.phase;
    if (c.phase === "Executing" && c.attempt) phase += " #" + c.attempt;
    if (c.slot_wait) phase += " (waiting for a slot of " + c.slot_wait + ")";
    if (c.phase === "Requested" && !c.recorded) phase += " (not gated yet)";
    let outcome = "";
    if (c.outcome) outcome = c.outcome + (c.is_error ? " (error)" : "");
    if (c.reason) outcome += ": " + c.reason;
    const timeline = el(
      "ol",
      { className: "timeline" },
      ...(c.timeline || []).map((m) =>
        el("li", { title: m.at }, el("span", { className: "stage", text: m.stage }), " ", el("span", { className: "muted", text: offset(b.created_at, m.at) + " · " + clock(m.at) })),
      ),
    );
    const phaseCell = el("td", { className: "phase " + c.phase, text: phase });
    const p = c.phase === "Executing" ? state.progress.get(b.batch_id + " " + c.call_id) : null;
    if (p) phaseCell.append(progressView(p));
    if (c.cancel) {
      phaseCell.append(el("div", { className: "muted cancel-mark", text: c.cancel.outcome + " by " + (c.cancel.actor || "?") + (c.cancel.reason ? ": " + c.cancel.reason : "") }));
    } else if (c.phase !== "Completed" && c.phase !== "Indeterminate" && can("operator") && c.operation_id) {
      // Cancel one call: before start it ends "cancelled before start", in its body it is
      // stopped (indeterminate, or the tool's acknowledged outcome); the api answers once it ended.
      const cancel = el("button", { type: "button", className: "cancel-call", text: "Cancel call", dataset: { operation: c.operation_id } });
      cancel.addEventListener("click", () => cancelCall(c, cancel));
      phaseCell.append(" ", cancel);
    }
    if (c.resolution) {
      const r = c.resolution;
      phaseCell.append(el("div", { className: "muted resolution-mark", text: r.applied + " as " + r.outcome + " by " + (r.actor || "?") + (r.role ? " (" + r.role + ")" : "") + (r.note ? ": " + r.note : "") }));
    } else if (c.phase === "Indeterminate" && can("operator") && c.operation_id) {
      // Resolve an indeterminate call: the operator checked what happened. Before the batch
      // is published the results carry it; after, a correction goes out beside them.
      const resolve = el("button", { type: "button", className: "resolve-call", text: "Resolve…", dataset: { operation: c.operation_id } });
      resolve.addEventListener("click", () => resolveCall(c, resolve));
      phaseCell.append(" ", resolve);
    }
    const cells = [
      el("td", { text: String(c.index) }),
      el("td", null, el("code", { text: c.call_id })),
      el("td", null, el("code", { text: c.tool_id })),
      phaseCell,
      el("td", { className: c.is_error ? "error" : "", text: outcome }),
      actorCell(c),
      el("td", null, timeline),
    ];
    const rows = [el("tr", null, ...cells)];
    const fc = full && full.calls ? full.calls[c.index] : null;
    if (fc) {
      const parts = [];
      if (fc.proposed_arguments !== undefined) {
        parts.push(el("div", { className: "label", text: "proposed arguments" }), el("pre", { className: "args proposed", text: prettyJSON(fc.proposed_arguments) }));
        parts.push(el("div", { className: "label", text: "approved arguments (what ran)" }), el("pre", { className: "args approved", text: prettyJSON(fc.arguments) }));
      } else {
        parts.push(el("div", { className: "label", text: "arguments" }), el("pre", { className: "args", text: prettyJSON(fc.arguments) }));
      }
      if (fc.output) {
        const text = (fc.output.content || []).map(blockText).join("\n");
        parts.push(el("div", { className: "label", text: "output" + (fc.output.is_error ? " (error)" : "") }), el("pre", { className: "output", text: text }));
      }
      rows.push(el("tr", { className: "detail" }, el("td", { colspan: "7" }, ...parts)));
    }
    const frag = document.createDocumentFragment();
    frag.append(...rows);
    return frag;
  }

  async function cancelCall(c, button) {
    $("batches-error").textContent = "";
    button.disabled = true;
    try {
      const res = await api("v1/calls/" + encodeURIComponent(c.operation_id) + "/cancel", { method: "POST", body: {} });
      setStatus(c.call_id + ": " + res.status, "ok");
    } catch (err) {
      button.disabled = false;
      $("batches-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    }
    await refreshBatches();
  }

  // resolveCall asks the operator what happened to an indeterminate call — it ran (with
  // its output, as text) or it did not — and a note, then resolves it.
  async function resolveCall(c, button) {
    $("batches-error").textContent = "";
    const ran = window.confirm("Did the effect of " + c.call_id + " happen?\nOK: it ran (you give its output). Cancel: it did not run.");
    let body;
    if (ran) {
      const text = window.prompt("The output of " + c.call_id + " (text the model reads):", "");
      if (text === null) return;
      body = { outcome: "ran", output: { call_id: c.call_id, content: [{ type: "text", text: text }] } };
    } else {
      body = { outcome: "not_run" };
    }
    const note = window.prompt("Note (what you checked; recorded" + (ran ? "" : ", and the model reads it") + "):", "");
    if (note === null) return;
    if (note) body.note = note;
    button.disabled = true;
    try {
      const res = await api("v1/calls/" + encodeURIComponent(c.operation_id) + "/resolve", { method: "POST", body: body });
      setStatus(c.call_id + ": " + res.status + " as " + res.outcome, "ok");
    } catch (err) {
      button.disabled = false;
      $("batches-error").textContent = (err.code ? err.code + ": " : "") + err.message;
    }
    await refreshBatches();
  }

  // blockText is the text view of one output block; an output stored by reference shows
  // where to read it (GET v1/objects/{name}).
  function blockText(blk) {
    if (blk.type === "text") return blk.text;
    if (blk.type === "resource_link") return "[stored by reference: " + blk.name + ", " + blk.size + " bytes, " + blk.mimeType + "; GET v1/objects/" + blk.name + "]";
    return "[" + blk.type + "]";
  }

  // progressView is a running call's latest progress: a bar when the total is known, and
  // "progress/total message" as text.
  function progressView(p) {
    const box = el("div", { className: "progress", dataset: { call: p.call_id } });
    if (p.total > 0) box.append(el("progress", { value: String(p.progress), max: String(p.total) }));
    box.append(el("span", { className: "muted", text: " " + p.progress + (p.total > 0 ? "/" + p.total : "") + (p.message ? " " + p.message : "") }));
    return box;
  }

  // onProgress keeps the latest report of each call (by attempt and sequence) and redraws
  // at most every 100 ms.
  function onProgress(p) {
    if (!p || typeof p.batch_id !== "string" || typeof p.call_id !== "string") return;
    const key = p.batch_id + " " + p.call_id;
    const prev = state.progress.get(key);
    if (prev && (prev.attempt > p.attempt || (prev.attempt === p.attempt && prev.seq >= p.seq))) return;
    state.progress.set(key, p);
    if (state.progressTimer) return;
    state.progressTimer = setTimeout(() => {
      state.progressTimer = 0;
      renderBatches();
    }, 100);
  }

  async function loadDetail(batchID) {
    try {
      const full = await api("v1/batches/" + encodeURIComponent(batchID));
      state.details.set(batchID, full);
      renderBatches();
    } catch (err) {
      setStatus("could not load " + batchID + ": " + err.message, "error");
    }
  }

  // ---- loading ----

  async function refreshTickets() {
    if (!can("viewer")) return;
    const body = await api("v1/tickets");
    state.tickets = new Map((body.tickets || []).map((t) => [t.correlation_id, t]));
    renderTickets();
  }

  async function refreshBatches() {
    if (!can("viewer")) return;
    const body = await api("v1/batches?limit=20");
    state.batches = body.batches || [];
    const shown = new Set(state.batches.map((b) => b.batch_id));
    for (const id of Array.from(state.expanded)) {
      if (!shown.has(id)) {
        state.expanded.delete(id);
        state.details.delete(id);
      }
    }
    await Promise.all(Array.from(state.expanded).map((id) => loadDetail(id)));
    // Forget the progress of calls that stopped running.
    for (const b of state.batches) {
      for (const c of b.calls) if (c.phase !== "Executing") state.progress.delete(b.batch_id + " " + c.call_id);
    }
    renderBatches();
  }

  async function refreshAll() {
    await Promise.all([refreshTickets(), refreshBatches(), refreshTools(), refreshLimits()]);
  }

  // scheduleBatches coalesces bursts of record changes into one reload.
  function scheduleBatches() {
    if (state.refreshTimer) return;
    state.refreshTimer = setTimeout(() => {
      state.refreshTimer = 0;
      refreshBatches().catch((err) => setStatus("reload failed: " + err.message, "error"));
      refreshLimits();
    }, 250);
  }

  // ---- live updates: server-sent events read with fetch, so the token can travel in a
  // header (EventSource cannot send one) ----

  function onEvent(name, data) {
    let payload = null;
    try {
      payload = data ? JSON.parse(data) : null;
    } catch (_) {
      return;
    }
    switch (name) {
      case "hello":
      case "resync":
        refreshAll().catch((err) => setStatus("reload failed: " + err.message, "error"));
        break;
      case "ticket":
        if (!payload) return;
        if (payload.op === "put" && payload.ticket) state.tickets.set(payload.correlation_id, payload.ticket);
        else state.tickets.delete(payload.correlation_id);
        renderTickets();
        break;
      case "batch":
      case "call":
        scheduleBatches();
        break;
      case "progress":
        onProgress(payload);
        break;
    }
  }

  async function stream() {
    if (state.streamAbort) state.streamAbort.abort();
    const ctrl = new AbortController();
    state.streamAbort = ctrl;
    const headers = { Accept: "text/event-stream" };
    if (state.token) headers.Authorization = "Bearer " + state.token;
    try {
      const res = await fetch("v1/stream", { headers, signal: ctrl.signal, cache: "no-store", credentials: "same-origin" });
      if (res.status === 401) {
        showLogin("Your token was refused. Sign in again.");
        return;
      }
      if (!res.ok || !res.body) throw new Error("stream: HTTP " + res.status);
      setStatus("live", "ok");
      state.retryDelay = 1000;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, "\n");
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let name = "message";
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const c = line.indexOf(":");
            const field = c < 0 ? line : line.slice(0, c);
            let v = c < 0 ? "" : line.slice(c + 1);
            if (v.startsWith(" ")) v = v.slice(1);
            if (field === "event") name = v;
            else if (field === "data") data.push(v);
          }
          if (data.length) onEvent(name, data.join("\n"));
        }
      }
      throw new Error("stream ended");
    } catch (err) {
      if (ctrl.signal.aborted) return;
      setStatus("reconnecting… (" + err.message + ")", "warn");
      const delay = state.retryDelay;
      state.retryDelay = Math.min(state.retryDelay * 2, 15000);
      setTimeout(() => {
        if (state.streamAbort === ctrl) stream();
      }, delay);
    }
  }

  // ---- sign in ----

  function showLogin(message) {
    if (state.streamAbort) state.streamAbort.abort();
    state.streamAbort = null;
    $("main").hidden = true;
    $("logout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    setStatus("signed out", "warn");
    $("token").focus();
  }

  async function start() {
    $("login").hidden = true;
    $("main").hidden = false;
    $("logout").hidden = !state.token;
    try {
      await loadSession();
    } catch (err) {
      setStatus("could not read the session: " + err.message, "error");
      return;
    }
    // The policy test replays the calls' arguments: it takes the viewer role.
    $("policy").hidden = !can("viewer");
    if (!can("viewer")) {
      // The event stream and the lists need the viewer role; show what the token may use.
      setStatus("signed in without the viewer role: tickets and batches are hidden", "warn");
      $("no-tickets").textContent = "Your token may not read tickets (viewer role needed).";
      $("no-batches").textContent = "Your token may not read batches (viewer role needed).";
      refreshTools().catch((err) => setStatus("reload failed: " + err.message, "error"));
      return;
    }
    stream();
  }

  async function boot() {
    $("policy-form").addEventListener("submit", runPolicyTest);
    $("policy-changed").addEventListener("change", renderPolicyTest);
    $("login-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const candidate = $("token").value.trim();
      $("login-error").textContent = "";
      state.token = candidate;
      try {
        await api("v1/session");
      } catch (err) {
        state.token = "";
        $("login-error").textContent = err.status === 401 ? "That token was refused." : err.message;
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, candidate);
      $("token").value = "";
      start();
    });
    $("logout").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = "";
      state.session = null;
      $("whoami").hidden = true;
      showLogin("");
    });
    setInterval(() => {
      for (const cell of document.querySelectorAll("td.age")) cell.textContent = age(cell.dataset.since);
    }, 1000);
    // Pauses made elsewhere (CLI, api) are not on the event stream: reload the tools now and then.
    setInterval(() => {
      if (!$("main").hidden) refreshTools().catch((err) => setStatus("reload failed: " + err.message, "error"));
    }, 15000);
    // Probe: with no token configured on the server (or a stored valid one) go straight in.
    try {
      await api("v1/session");
      start();
    } catch (err) {
      if (err.status !== 401) {
        setStatus("api unreachable: " + err.message, "error");
        start();
      }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
