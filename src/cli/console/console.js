// rein console: the page script. Plain, no dependency, no other origin. The server renders
// every piece of markup (escaped there); this script only swaps server-rendered fragments in,
// sends JSON requests, and writes text (never markup) of its own.
"use strict";

(function () {
  const page = document.body.dataset.page;

  /** A JSON request to the console; resolves to {ok, status, body}. */
  async function call(method, url, body) {
    const init = { method, headers: { "Content-Type": "application/json" } };
    if (body !== undefined) init.body = JSON.stringify(body);
    let response;
    try {
      response = await fetch(url, init);
    } catch (e) {
      return { ok: false, status: 0, body: { error: { message: "the console does not answer" } } };
    }
    let parsed = null;
    try {
      parsed = await response.json();
    } catch (e) {
      parsed = null;
    }
    return { ok: response.ok, status: response.status, body: parsed };
  }

  function message(result) {
    const error = result.body && result.body.error;
    return error ? error.message : "the console answered " + result.status;
  }

  function showError(text) {
    const box = document.getElementById("page-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }

  /** Log times as the reader's local time. */
  function localTimes(root) {
    for (const time of root.querySelectorAll("time[data-ms]")) {
      const date = new Date(Number(time.dataset.ms));
      time.title = time.textContent;
      time.textContent = date.toLocaleString();
    }
  }

  /** Follows server-sent `update` events on `url`. */
  function follow(url, apply) {
    const source = new EventSource(url);
    source.addEventListener("update", (event) => {
      const update = JSON.parse(event.data);
      if (update.error) {
        showError(update.error);
        return;
      }
      showError("");
      apply(update);
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.OPEN) {
        showError("Disconnected from the console; reconnecting…");
      }
    });
    window.addEventListener("pagehide", () => source.close());
  }

  // ---- the sessions list ----

  function sessionsPage() {
    const rows = document.getElementById("session-rows");
    localTimes(rows);
    follow("/api/events", (update) => {
      rows.innerHTML = update.rows;
      localTimes(rows);
    });
    const create = document.getElementById("new-session");
    if (create) {
      create.addEventListener("click", async () => {
        create.disabled = true;
        const result = await call("POST", "/api/sessions", {});
        if (result.ok) {
          window.location.assign(result.body.url);
        } else {
          create.disabled = false;
          showError(message(result));
        }
      });
    }
  }

  // ---- one session ----

  function sessionPage() {
    const id = document.body.dataset.session;
    const conversation = document.getElementById("conversation");
    const status = document.getElementById("status");
    const cancel = document.getElementById("cancel");
    localTimes(status);

    follow("/api/sessions/" + encodeURIComponent(id) + "/events", (update) => {
      // Keep what the reader opened, and the bottom in view when it was.
      const open = new Set();
      for (const details of conversation.querySelectorAll("details[open]")) {
        open.add(key(details));
      }
      const atBottom =
        window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 40;
      // The first `kept` turns are final: keep them, replace what follows with the tail.
      let kept = update.kept;
      for (const child of Array.from(conversation.children)) {
        if (kept > 0 && child.matches("article.turn:not(.queued)")) {
          kept -= 1;
        } else {
          child.remove();
        }
      }
      const fresh = document.createElement("template");
      fresh.innerHTML = update.tail;
      for (const details of fresh.content.querySelectorAll("details")) {
        if (open.has(key(details))) details.open = true;
      }
      conversation.append(fresh.content);
      status.innerHTML = update.status;
      localTimes(status);
      document.body.dataset.state = update.state.state;
      document.body.dataset.events = String(update.events);
      if (cancel) cancel.disabled = !update.running;
      if (atBottom) window.scrollTo(0, document.documentElement.scrollHeight);
    });

    function key(details) {
      const turn = details.closest("[data-turn]");
      const all = turn ? Array.from(turn.querySelectorAll("details")) : [];
      return (turn ? turn.dataset.turn : "") + ":" + all.indexOf(details);
    }

    if (cancel) {
      cancel.addEventListener("click", async () => {
        cancel.disabled = true;
        const result = await call("POST", "/api/sessions/" + encodeURIComponent(id) + "/cancel", {});
        if (!result.ok) {
          cancel.disabled = false;
          showError(message(result));
        }
      });
    }

    const form = document.getElementById("prompt-form");
    if (form) {
      const prompt = document.getElementById("prompt");
      const send = document.getElementById("send");
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        if (!prompt.value.trim()) return;
        send.disabled = true;
        const result = await call("POST", "/api/sessions/" + encodeURIComponent(id) + "/prompt", {
          text: prompt.value,
        });
        send.disabled = false;
        if (result.ok) {
          prompt.value = "";
          showError("");
        } else {
          showError(message(result));
        }
      });
      prompt.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          form.requestSubmit();
        }
      });
    }
  }

  // ---- the Plugins page ----

  /** The form as it stands: what the server stages and saves. */
  function staged(form) {
    const fields = {};
    for (const field of form.querySelectorAll(".field[data-field]")) {
      const key = field.dataset.field;
      switch (field.dataset.kind) {
        case "switch":
          fields[key] = field.querySelector("input").checked;
          break;
        case "codes":
          fields[key] = {
            switches: Array.from(field.querySelectorAll("input[data-code]"))
              .filter((input) => input.checked)
              .map((input) => input.dataset.code),
            other: field.querySelector("textarea").value,
          };
          break;
        case "routes":
          fields[key] = field.querySelector("textarea").value;
          break;
        default:
          fields[key] = field.querySelector("input").value;
      }
    }
    return { revision: Number(form.dataset.revision), fields };
  }

  function outcome(form, text, kind) {
    const line = form.querySelector(".outcome");
    line.textContent = text || "";
    line.dataset.outcome = kind || "";
    line.hidden = !text;
  }

  /** Shows what the server said of the staged edits: problems by field, what Save would send. */
  function render(form, answer) {
    const problems = answer.problems || [];
    for (const field of form.querySelectorAll(".field[data-field]")) {
      const mine = problems.filter((p) => p.field === field.dataset.field);
      const line = field.querySelector(".problem");
      line.textContent = mine.map((p) => p.message).join("\n");
      line.hidden = mine.length === 0;
      field.classList.toggle("invalid", mine.length > 0);
      for (const input of field.querySelectorAll("input[name], textarea")) {
        input.setAttribute("aria-invalid", mine.length > 0 ? "true" : "false");
      }
    }
    // `null`: the form was drawn at a revision the console no longer knows.
    const changed = answer.changed === undefined ? [] : answer.changed;
    const save = form.querySelector("button.save");
    const note = form.querySelector(".staged");
    // A form drawn before another client saved can only be refused: Save stays off.
    save.disabled = Boolean(answer.stale) || !changed || changed.length === 0 || problems.length > 0;
    form.dataset.staged = (changed || []).join(",");
    form.dataset.problems = String(problems.length);
    if (problems.length > 0) {
      note.textContent = "Cannot save: " + problems.map((p) => p.field).join(", ") + ".";
    } else if (!changed) {
      note.textContent = "Staged edits are kept in the form, not saved.";
    } else if (changed.length > 0) {
      note.textContent = "Staged, not saved: " + changed.join(", ") + ".";
    } else {
      note.textContent = "No staged edits.";
    }
    if (answer.stale) {
      outcome(
        form,
        "The settings changed underneath: another client saved revision " + answer.revision +
          " after revision " + form.dataset.revision + ", which this form shows. Reload to see " +
          "them (the staged edits are not kept); Save is off, since it would be refused.",
        "stale",
      );
    }
  }

  function settingsForm(form) {
    const plugin = form.dataset.plugin;
    const base = "/api/plugins/" + encodeURIComponent(plugin);
    let asked = 0;
    let pending = null;

    async function check() {
      const mine = ++asked;
      form.dataset.checking = "true";
      const result = await call("POST", base + "/staged", staged(form));
      if (mine !== asked) return; // a later edit asked again
      delete form.dataset.checking;
      if (result.ok) {
        render(form, result.body);
      } else {
        outcome(form, message(result), "error");
      }
    }

    form.addEventListener("input", () => {
      outcome(form, "");
      pending = check();
    });
    form.addEventListener("change", () => {
      pending = check();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const save = form.querySelector("button.save");
      if (pending) await pending;
      if (save.disabled) return;
      save.disabled = true;
      const result = await call("POST", base + "/save", staged(form));
      if (result.ok) {
        // The section as the server draws it now: the accepted values at the new revision.
        const section = form.closest("section.plugin");
        section.outerHTML = result.body.html;
        const fresh = document.getElementById("plugin-" + plugin).querySelector("form.settings");
        if (fresh) settingsForm(fresh);
        return;
      }
      if (result.status === 422 && result.body && result.body.error) {
        render(form, { problems: result.body.error.problems, changed: [] });
      }
      const kind = result.status === 409 ? "stale" : "error";
      outcome(form, "Not saved: " + message(result).replace(/^not saved: /, ""), kind);
      save.disabled = result.status === 409;
    });
  }

  function pluginsPage() {
    const forms = document.querySelectorAll("form.settings");
    for (const form of forms) settingsForm(form);
    // Leaving the page discards staged edits: a page brought back from history shows the
    // accepted values again, not what the browser kept in the inputs.
    window.addEventListener("pageshow", (event) => {
      if (event.persisted) window.location.reload();
    });
    for (const form of forms) form.reset();
  }

  // ---- the Routes page ----

  function routesPage() {
    const sections = document.getElementById("route-sections");
    if (!sections) return; // read-only: no runtime, no routes
    localTimes(sections);
    follow("/api/routes/events", (update) => {
      sections.innerHTML = update.html;
      localTimes(sections);
      document.body.dataset.routes = update.routes
        .map((route) => route.name + ":" + (route.health ? route.health.state : "off"))
        .join(",");
    });
  }

  if (page === "sessions") sessionsPage();
  else if (page === "session") sessionPage();
  else if (page === "plugins") pluginsPage();
  else if (page === "routes") routesPage();
})();
