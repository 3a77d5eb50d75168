// hookbus console: live regions over server-sent events, and the buttons that decide.
// No framework and no build step: the server renders every fragment; this file fetches
// a region's fragment again when the live stream says something changed, and sends the
// operator's decisions to the JSON API with the session's CSRF token.
"use strict";

(function () {
  const csrf = (document.querySelector('meta[name="hookbus-csrf"]') || {}).content || "";
  const badge = document.getElementById("live-status");

  function setStatus(text, ok) {
    if (!badge) return;
    badge.textContent = text;
    badge.className = "badge " + (ok ? "ok" : "bad");
  }

  // --- live regions -------------------------------------------------------------------
  const regions = Array.from(document.querySelectorAll("[data-live]"));
  const timers = new Map();

  const shown = new Map();  // region -> the fragment it shows now

  // An approval the page already shows keeps its own element across refreshes: the
  // reason the operator is typing, the caret, the focus and a decision in flight stay as
  // they are, and only its clock line is brought up to date.
  function keepApprovals(region, fresh) {
    fresh.querySelectorAll("[data-approval]").forEach((item) => {
      const old = region.querySelector('[data-approval="' + CSS.escape(item.dataset.approval) + '"]');
      if (!old) return;
      const when = item.querySelector(".when");
      const oldWhen = old.querySelector(".when");
      if (when && oldWhen) oldWhen.textContent = when.textContent;
      item.replaceWith(old);
    });
  }

  async function refresh(region) {
    try {
      const response = await fetch(region.dataset.live, { credentials: "same-origin" });
      if (response.status === 401) { location.href = "/login"; return; }
      if (!response.ok) { setStatus("reconnecting…", false); return; }
      const html = await response.text();
      if (shown.get(region) === html) return;
      shown.set(region, html);
      const focused = region.contains(document.activeElement) ? document.activeElement : null;
      const caret = focused && "selectionStart" in focused
        ? [focused.selectionStart, focused.selectionEnd] : null;
      const fresh = document.createElement("div");
      fresh.innerHTML = html;
      keepApprovals(region, fresh);
      region.replaceChildren(...fresh.childNodes);
      if (focused && focused.isConnected) {
        focused.focus();
        if (caret) focused.setSelectionRange(caret[0], caret[1]);
      }
    } catch (err) {
      setStatus("reconnecting…", false);
    }
  }

  // A region with data-min (ms) refreshes at most that often, however busy the fleet is:
  // the Overview reads the decision log for its charts, and an event per decision must not
  // make every open page read it twenty times a second.
  const last = new Map();
  function soon(region) {
    if (timers.has(region)) return;
    const min = parseInt(region.dataset.min || "0", 10);
    const wait = Math.max(50, min - (Date.now() - (last.get(region) || 0)));
    timers.set(region, setTimeout(() => {
      timers.delete(region);
      last.set(region, Date.now());
      refresh(region);
    }, wait));
  }

  regions.forEach((region) => {
    const every = parseInt(region.dataset.every || "0", 10);
    if (every > 0) setInterval(() => refresh(region), every);
  });

  if (badge) {
    const source = new EventSource("/api/stream");
    source.addEventListener("status", (e) => {
      const data = JSON.parse(e.data);
      if (data.redis === "ok") setStatus("live", true);
      else setStatus("reconnecting…", false);
      if (data.redis === "ok") regions.forEach(soon);
    });
    ["decision", "approval"].forEach((kind) => {
      source.addEventListener(kind, () => {
        regions.forEach((region) => {
          const on = (region.dataset.on || "decision approval").split(" ");
          if (on.includes(kind)) soon(region);
        });
      });
    });
    source.onerror = () => setStatus("reconnecting…", false);
  }

  const retry = document.querySelector("[data-retry]");
  if (retry) setTimeout(() => location.reload(), parseInt(retry.dataset.retry, 10));

  // --- deciding -----------------------------------------------------------------------
  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-HookBus-CSRF": csrf },
      body: JSON.stringify(body || {}),
    });
    let data = {};
    try { data = await response.json(); } catch (err) { data = {}; }
    return { ok: response.ok, data: data };
  }

  function say(container, text, ok) {
    const out = container.querySelector(".result");
    if (out) { out.textContent = text; out.className = "result " + (ok ? "ok" : "bad"); }
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    if (button.dataset.decide) {
      const item = button.closest("[data-approval]");
      const input = item.querySelector("input.reason");
      item.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      const id = item.dataset.approval;
      const { ok, data } = await post("/api/approvals/" + encodeURIComponent(id), {
        decision: button.dataset.decide,
        reason: input ? input.value : "",
      });
      // an allow short of the operators an approval needs leaves it waiting for another
      const partial = ok && data.state === "pending";
      say(item, !ok ? data.error || "refused"
        : partial ? "allowed: " + data.allowed_by.length + " of " + data.approvers
          + " operators; it waits for another operator"
        : data.state + " by " + data.decided_by, ok);
      if (!ok) item.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      regions.forEach(soon);
    } else if (button.dataset.hookDecide) {
      const item = button.closest("[data-hook]");
      const name = item.dataset.hook;
      // an approval names the copy this page showed: the server refuses any other
      const { ok, data } = await post(
        "/api/hooks/" + encodeURIComponent(name) + "/" + button.dataset.hookDecide,
        { sha256: item.dataset.sha256 });
      say(item, ok ? (data.approved ? "approved: the next reload publishes it" : "rejected")
        : data.error || "refused", ok);
      if (ok) item.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    } else if (button.dataset.deadAction) {
      const row = button.closest("[data-dead]");
      const { ok, data } = await post(
        "/api/dead/" + encodeURIComponent(row.dataset.dead) + "/" + button.dataset.deadAction);
      say(row, ok ? button.dataset.deadAction + "d" : data.error || "refused", ok);
    }
  });
})();
