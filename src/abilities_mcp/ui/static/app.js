// The local page's script (abilities-mcp ui). Every page works without it: forms post, pages reload. With it:
// - the page is live: the server's event stream (body's data-events) says when something changed, and the page
//   fetches itself and swaps in the elements marked data-live that differ (no polling: nothing is fetched until the
//   server speaks);
// - an answer is sent without leaving the page (to its form's action), and its item leaves the list;
// - a running step's output arrives as it is printed (its own stream, the data-follow of #follow).
// The page's Content-Security-Policy allows no inline script: data comes in data- attributes. Every page is under a
// secret path prefix (/s/<prefix>/) that the session cookie is scoped to: this script names no URL of its own, it
// uses only those the server drew under the prefix (data-events, data-follow, a form's action) and the page's own.
"use strict";

(function () {
  const body = document.body;
  const csrf = body.dataset.csrf || "";
  const liveStatus = document.getElementById("live");

  function say(element, text) {
    if (element && element.textContent !== text) element.textContent = text;
  }

  // --- live: swap in what changed ---------------------------------------------------------------------------------

  let running = false;
  let again = false;

  async function refresh() {
    if (running) {
      again = true; // one more look once this one is done
      return;
    }
    running = true;
    try {
      do {
        again = false;
        const response = await fetch(location.href, { headers: { Accept: "text/html" }, cache: "no-store" });
        if (!response.ok) return;
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        for (const old of document.querySelectorAll("[data-live][id]")) {
          if (!old.isConnected) continue; // inside one reconciled already
          const now = fresh.getElementById(old.id);
          if (now) reconcile(old, now);
        }
      } while (again);
    } catch (error) {
      // the next change tries again
    } finally {
      running = false;
    }
  }

  // Make `old` look like `now`, keeping every node whose content did not change (and with it what is typed into it
  // and where the focus is). Children of a data-live="keyed" element are matched by id.
  function reconcile(old, now) {
    if (old.isEqualNode(now)) return old;
    if (old.dataset.live !== "keyed" || old.tagName !== now.tagName) {
      const focused = old.contains(document.activeElement) ? document.activeElement.id : "";
      const fresh = document.importNode(now, true);
      old.replaceWith(fresh);
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      return fresh;
    }
    for (const name of old.getAttributeNames()) if (!now.hasAttribute(name)) old.removeAttribute(name);
    for (const attribute of now.attributes) old.setAttribute(attribute.name, attribute.value);
    const byId = new Map();
    const unnamed = [];
    for (const child of old.children) (child.id ? byId.set(child.id, child) : unnamed.push(child));
    const wanted = Array.from(now.children, (child) => {
      if (!child.id) {
        const same = unnamed.findIndex((before) => before.isEqualNode(child));
        return same >= 0 ? unnamed.splice(same, 1)[0] : document.importNode(child, true);
      }
      const before = byId.get(child.id);
      return before ? reconcile(before, child) : document.importNode(child, true);
    });
    wanted.forEach((node, index) => {
      const there = old.children[index];
      if (there !== node) old.insertBefore(node, there || null); // never moves a node already in place
    });
    while (old.children.length > wanted.length) old.lastElementChild.remove();
    return old;
  }

  if (body.dataset.events && "EventSource" in window) {
    const source = new EventSource(body.dataset.events);
    let opened = false;
    source.addEventListener("open", () => say(liveStatus, "live"));
    source.addEventListener("ready", () => {
      say(liveStatus, "live");
      if (opened) refresh(); // back after a break: catch up on what changed meanwhile
      opened = true;
    });
    source.addEventListener("change", refresh);
    source.addEventListener("error", () => {
      say(liveStatus, source.readyState === EventSource.CLOSED ? "not live: reload the page" : "reconnecting…");
    });
  }

  // --- answers: sent without leaving the page ---------------------------------------------------------------------

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.matches("form[data-answer]")) return;
    event.preventDefault();
    const fields = new FormData(form);
    if (event.submitter && event.submitter.name) fields.set(event.submitter.name, event.submitter.value);
    const item = form.closest("article");
    const problem = item ? item.querySelector(".problem") : null;
    const buttons = Array.from(form.querySelectorAll("button"));
    buttons.forEach((b) => (b.disabled = true));
    let said = { ok: false, message: "" };
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(fields),
        headers: { Accept: "application/json", "X-CSRF-Token": csrf },
      });
      try {
        said = await response.json();
      } catch (error) {
        said = { ok: false, message: `Refused (${response.status}): reload the page, or log in again.` };
      }
    } catch (error) {
      said = { ok: false, message: "The page's server cannot be reached: is `abilities-mcp ui` still running?" };
    }
    if (said.ok) {
      const flash = document.getElementById("flash");
      say(flash, said.message);
      if (item) item.remove();
      if (flash) {
        flash.tabIndex = -1;
        flash.focus();
      }
      refresh();
    } else {
      buttons.forEach((b) => (b.disabled = false));
      say(problem, said.message);
    }
  });

  // --- a running step's output, as it is printed ------------------------------------------------------------------

  const follow = document.getElementById("follow");
  if (follow && follow.dataset.follow && "EventSource" in window) {
    const stream = new EventSource(follow.dataset.follow);
    stream.addEventListener("output", (event) => {
      const atEnd = follow.scrollTop + follow.clientHeight >= follow.scrollHeight - 4;
      follow.append(JSON.parse(event.data));
      if (atEnd) follow.scrollTop = follow.scrollHeight;
    });
    stream.addEventListener("end", (event) => {
      stream.close();
      const end = JSON.parse(event.data);
      const code = end.exit_code === null || end.exit_code === undefined ? "" : `, exit ${end.exit_code}`;
      follow.append(`\n--- ${end.status}${code}\n`);
    });
  }
})();
