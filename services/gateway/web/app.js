// The ragbus page: ask, follow the stages live (EventSource), show iterations and the cited answer.
// Document text and titles come from untrusted pages: they are only ever set as text
// (never innerHTML), and only http(s) URLs become links.
"use strict";

(function () {
  // The gateway writes the stage registry's event sources into the page (QUERY_EVENT_SOURCES).
  const STAGE_EVENTS = (document.querySelector('meta[name="ragbus-stage-events"]')?.content || "")
    .split(",").filter(Boolean);
  if (!STAGE_EVENTS.length) console.error("ragbus: the page lists no stage events; live progress will not show");
  const OUTCOMES = {
    answered: "Answered",
    answered_with_caveat: "Answered, with a caveat",
    not_answerable: "The documents do not answer this question",
    failed: "Failed",
    timed_out: "Timed out",
  };

  const $ = (id) => document.getElementById(id);
  let source = null;
  let currentId = null;
  let refreshTimer = null;
  // The conversation the next question continues (null: the next question starts one).
  let conversationId = null;
  // The answer the feedback form rates, and the rating chosen for it.
  let feedbackFor = null;
  let chosenRating = null;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function safeUrl(raw) {
    if (!raw) return null;
    try {
      const url = new URL(raw, window.location.href);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (_) {
      return null;
    }
  }

  function sourceLink(text, url) {
    const href = safeUrl(url);
    if (!href) return el("span", { class: "unlinked", title: "no web address" }, text);
    return el("a", { href, target: "_blank", rel: "noopener noreferrer" }, text);
  }

  function fmt(value) {
    return typeof value === "number" ? value.toFixed(2) : "—";
  }

  function clock(iso) {
    const date = new Date(iso);
    return isNaN(date) ? "" : date.toLocaleTimeString([], { hour12: false });
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  function showError(text) {
    const box = $("form-error");
    box.textContent = text;
    box.hidden = !text;
  }

  function setBusy(busy) {
    $("ask").disabled = busy;
    $("ask-form").setAttribute("aria-busy", busy ? "true" : "false");
  }

  async function readError(response) {
    try {
      const body = await response.json();
      if (body && body.error) return body.error;
    } catch (_) { /* not JSON */ }
    return `the gateway answered ${response.status}`;
  }

  // ---------------------------------------------------------------- asking

  async function ask(event) {
    event.preventDefault();
    showError("");
    const question = $("question").value.trim();
    if (!question) {
      showError("Type a question first.");
      $("question").focus();
      return;
    }
    const body = { question, wait_s: 0 };
    const topK = $("top-k").value.trim();
    const maxIterations = $("max-iterations").value.trim();
    if (topK) body.top_k = Number(topK);
    if (maxIterations) body.max_iterations = Number(maxIterations);
    if (conversationId) body.conversation_id = conversationId;
    const filters = filterInputs();
    if (Object.keys(filters).length) body.filters = filters;
    setBusy(true);
    resetResults();
    setStatus("Submitting…");
    let response;
    try {
      response = await fetch("/v1/queries", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      setBusy(false);
      setStatus("");
      showError(`Could not reach the gateway: ${err.message}`);
      return;
    }
    if (response.status !== 200 && response.status !== 202) {
      setBusy(false);
      setStatus("");
      showError(await readError(response));
      if (response.status === 404 && body.conversation_id) {
        // the conversation expired: the question is still in the box, and asking again starts a new one
        setConversation(null);
        $("thread-section").hidden = true;
      }
      return;
    }
    const reply = await response.json();
    follow(reply.id);
    if (reply.conversation_id) setConversation(reply.conversation_id);
    loadThread();
  }

  // The form's filter inputs that are filled in, as the API's `filters` object (the gateway validates them).
  function filterInputs() {
    const filters = {};
    for (const name of ["source", "since", "until"]) {
      const value = $(`filter-${name}`).value.trim();
      if (value) filters[name] = value;
    }
    return filters;
  }

  function resetResults() {
    $("timeline").replaceChildren();
    $("iterations").replaceChildren();
    $("answer").replaceChildren();
    $("citations").replaceChildren();
    $("outcome").textContent = "";
    $("fallbacks").replaceChildren();
    $("fallbacks").hidden = true;
    $("filters").textContent = "";
    $("filters").hidden = true;
    $("read-as").textContent = "";
    $("read-as").hidden = true;
    $("time-read").textContent = "";
    $("time-read").hidden = true;
    $("answer-section").hidden = true;
    $("iterations-section").hidden = true;
    $("search-section").hidden = true;
  }

  function follow(id) {
    if (source) source.close();
    currentId = id;
    $("trace-section").hidden = true;
    const url = new URL(window.location.href);
    url.searchParams.set("id", id);
    history.replaceState(null, "", url);
    $("progress-section").hidden = false;
    setStatus("Working on it…");
    setBusy(true);
    source = new EventSource(`/v1/queries/${encodeURIComponent(id)}/events`);
    const watched = source;
    const poll = setInterval(() => { if (source === watched) refresh(); else clearInterval(poll); }, 2000);
    for (const name of STAGE_EVENTS) source.addEventListener(name, onStageEvent);
    source.addEventListener("end", (event) => {
      source.close();
      source = null;
      const record = JSON.parse(event.data);
      renderRecord(record);
      setBusy(false);
    });
    source.addEventListener("error", () => {
      // EventSource reconnects by itself (resuming after the last event id);
      // once it gives up, read the record so the page still shows where things are.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        setBusy(false);
        setStatus("Lost the live connection; showing the last known state.");
        refresh();
      }
    });
  }

  function onStageEvent(event) {
    const data = JSON.parse(event.data);
    // A refresh may already have drawn this event from the record: draw each index once.
    if (!Number.isInteger(data.index) || data.index === $("timeline").children.length) {
      $("timeline").append(timelineItem(data, event.type));
    }
    setStatus(`${data.stage || "stage"}: ${data.type || ""}`);
    scheduleRefresh();
  }

  function timelineItem(data, fallbackType) {
    const iteration = Number.isInteger(data.iteration) ? ` · iteration ${data.iteration + 1}` : "";
    const detail = describeDetail(data.detail);
    return el("li", { class: `event stage-${data.stage || "other"}`, "data-stage": data.stage || "", "data-type": data.type || "" },
      el("time", { datetime: data.at || "" }, clock(data.at)),
      el("span", { class: "stage" }, data.stage || "?"),
      el("span", { class: "type" }, `${data.type || fallbackType || ""}${iteration}`),
      detail ? el("span", { class: "detail" }, detail) : null);
  }

  // The record is the source of truth: the timeline is redrawn from its events, so
  // an event whose name the page does not listen for still shows up.
  function renderTimeline(events) {
    if (!events || events.length < $("timeline").children.length) return;
    $("timeline").replaceChildren(...events.map((e) => timelineItem(e)));
  }

  function describeDetail(detail) {
    if (detail === null || detail === undefined) return "";
    if (typeof detail === "string") return detail;
    return Object.entries(detail).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
  }

  function scheduleRefresh() {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 150);
  }

  async function refresh() {
    if (!currentId) return;
    const id = currentId;
    try {
      const response = await fetch(`/v1/queries/${encodeURIComponent(id)}`);
      if (!response.ok) return;
      const record = await response.json();
      if (id === currentId) renderRecord(record);
    } catch (_) { /* the next event or the end event refreshes again */ }
  }

  // ------------------------------------------------------------- rendering

  function renderRecord(record) {
    renderTimeline(record.events);
    renderIterations(record);
    const ended = ["answered", "failed", "timed_out"].includes(record.status);
    if (!ended) return;
    const outcome = OUTCOMES[record.outcome] || record.outcome || record.status;
    setStatus(`Done: ${outcome}.`);
    $("answer-section").hidden = false;
    $("outcome").textContent = record.error && record.status !== "answered" ? `${outcome}: ${record.error}` : outcome;
    $("outcome").className = `outcome outcome-${record.outcome || record.status}`;
    renderFilters(record.filters);
    renderReadAs(record);
    renderTimeRead(record.time_filter);
    renderFallbacks(record.fallbacks || []);
    renderAnswer(record.answer || "", record.citations || []);
    if (record.id !== feedbackFor) resetFeedback(record);
    loadTrace(record.id);
    if (record.conversation_id && record.conversation_id === conversationId) loadThread();
  }

  // A follow-up is searched as the standalone question the loop read it as: show that beside it.
  function renderReadAs(record) {
    const readAs = record.standalone_question;
    const shown = Boolean(readAs) && readAs !== record.original_query;
    $("read-as").hidden = !shown;
    $("read-as").textContent = shown ? `Read as: ${readAs}` : "";
  }

  // ---------------------------------------------------------- conversation

  function setConversation(id) {
    conversationId = id;
    const url = new URL(window.location.href);
    if (id) url.searchParams.set("conversation", id);
    else url.searchParams.delete("conversation");
    history.replaceState(null, "", url);
  }

  // The thread is redrawn from GET /v1/conversations/{id}: the turns as the gateway keeps them.
  async function loadThread() {
    const id = conversationId;
    if (!id) return;
    let response;
    try {
      response = await fetch(`/v1/conversations/${encodeURIComponent(id)}`);
    } catch (_) { return; /* the next answered turn loads it again */ }
    if (id !== conversationId) return;
    if (response.status === 404) {
      setConversation(null);
      $("thread-section").hidden = true;
      showError("That conversation is no longer stored (it expired with its questions); the next question " +
                "starts a new one.");
      return;
    }
    if (!response.ok) return;
    const body = await response.json();
    if (id === conversationId) renderThread(body.turns || []);
  }

  function renderThread(turns) {
    $("thread-section").hidden = turns.length === 0;
    $("thread").replaceChildren(...turns.map((turn, n) => {
      const link = new URL(window.location.href);
      link.search = "";
      link.hash = "trace-section";
      link.searchParams.set("id", turn.query_id);
      link.searchParams.set("conversation", conversationId);
      const readAs = turn.standalone_question && turn.standalone_question !== turn.question
        ? el("p", { class: "turn-read-as" }, `Read as: ${turn.standalone_question}`) : null;
      const ended = ["answered", "failed", "timed_out"].includes(turn.status);
      const outcome = OUTCOMES[turn.outcome] || turn.outcome || turn.status;
      return el("li", { class: `turn${turn.query_id === currentId ? " current" : ""}`, "data-query-id": turn.query_id },
        el("p", { class: "turn-question" }, `${n + 1}. ${turn.question}`),
        readAs,
        el("p", { class: "turn-answer" }, ended ? (turn.answer || outcome) : "Working on it…"),
        el("p", { class: "turn-links" }, `${outcome} · `,
          el("a", { href: link.pathname + link.search + link.hash, class: "turn-trace" }, "stages and trace"),
          (turn.citations || []).length
            ? ` · ${turn.citations.length} ${turn.citations.length === 1 ? "source" : "sources"}` : ""),
        ended ? turnThumbs(turn.query_id, n + 1) : null);
    }));
  }

  // Every answer of the thread can be rated in one click; the form below the answer adds a comment.
  function turnThumbs(queryId, number) {
    const said = el("span", { class: "turn-rated", role: "status" });
    const thumb = (rating, symbol, word) => {
      const button = el("button", { type: "button", class: "secondary turn-rate", "data-rating": rating,
        "aria-label": `Rate answer ${number} ${word}`, title: `The answer was ${word}` }, symbol);
      button.addEventListener("click", async () => {
        const result = await sendFeedback(queryId, { rating });
        said.textContent = result.ok ? ` rated ${rating}` : ` ${result.error}`;
      });
      return button;
    };
    return el("p", { class: "turn-thumbs" }, "Was it right? ", thumb("up", "✓ right", "right"), thumb("down", "✗ wrong", "wrong"),
      said);
  }

  // ------------------------------------------------------------- feedback

  // Who rates: a random id this browser keeps, so a second rating of an answer replaces the first.
  function clientId() {
    let id = null;
    try { id = window.localStorage.getItem("ragbus-client"); } catch (_) { /* storage blocked */ }
    if (!id || !/^page-[0-9a-f]{32}$/.test(id)) {
      const bytes = new Uint8Array(16);
      window.crypto.getRandomValues(bytes);
      id = "page-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
      try { window.localStorage.setItem("ragbus-client", id); } catch (_) { /* a rating per page load then */ }
    }
    return id;
  }

  async function sendFeedback(queryId, body) {
    let response;
    try {
      response = await fetch(`/v1/queries/${encodeURIComponent(queryId)}/feedback`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Ragbus-Client": clientId() },
        body: JSON.stringify(body),
      });
    } catch (err) {
      return { ok: false, error: `Could not reach the gateway: ${err.message}` };
    }
    if (!response.ok) return { ok: false, error: await readError(response) };
    return { ok: true, body: await response.json() };
  }

  function resetFeedback(record) {
    feedbackFor = record.id;
    chosenRating = null;
    for (const id of ["rate-up", "rate-down"]) $(id).setAttribute("aria-pressed", "false");
    $("feedback-details").hidden = true;
    $("feedback-comment").value = "";
    $("feedback-expected").value = "";
    $("feedback-status").textContent = "";
    $("feedback-comment-shown").textContent = "";
    $("feedback-comment-shown").hidden = true;
    $("feedback-error").textContent = "";
    $("feedback-error").hidden = true;
    const citations = record.citations || [];
    $("feedback-citations").hidden = citations.length === 0;
    $("feedback-citation-list").replaceChildren(...citations.map((c) => el("label", {},
      el("input", { type: "checkbox", name: "wrong_citations", value: c.id, "data-cite": c.id }),
      `[${c.id}] ${c.title || c.url || ""}`)));
  }

  function feedbackError(text) {
    $("feedback-error").textContent = text;
    $("feedback-error").hidden = !text;
  }

  // A thumb rates at once; the details (comment, wrong citations, right answer) go with "Send feedback".
  async function rate(rating) {
    if (!feedbackFor) return;
    chosenRating = rating;
    $("rate-up").setAttribute("aria-pressed", String(rating === "up"));
    $("rate-down").setAttribute("aria-pressed", String(rating === "down"));
    $("feedback-details").hidden = false;
    feedbackError("");
    const result = await sendFeedback(feedbackFor, { rating });
    if (!result.ok) { feedbackError(result.error); return; }
    $("feedback-status").textContent = `Thanks: rated ${rating === "up" ? "right" : "wrong"}. ` +
      "Add a comment below if you like.";
  }

  async function submitFeedback(event) {
    event.preventDefault();
    if (!feedbackFor || !chosenRating) { feedbackError("Choose Right or Wrong first."); return; }
    const body = { rating: chosenRating };
    const comment = $("feedback-comment").value.trim();
    const expected = $("feedback-expected").value.trim();
    const wrong = Array.from(document.querySelectorAll('#feedback-citation-list input:checked'),
      (box) => Number(box.value));
    if (comment) body.comment = comment;
    if (expected) body.expected = expected;
    if (wrong.length) body.wrong_citations = wrong;
    feedbackError("");
    const result = await sendFeedback(feedbackFor, body);
    if (!result.ok) { feedbackError(result.error); return; }
    $("feedback-status").textContent = `Feedback sent: rated ${chosenRating === "up" ? "right" : "wrong"}` +
      (wrong.length ? `, citation ${wrong.map((n) => `[${n}]`).join(" ")} wrong.` : ".");
    // what was kept, shown as the text it is (a comment is never markup)
    $("feedback-comment-shown").textContent = comment ? `Your comment: ${comment}` : "";
    $("feedback-comment-shown").hidden = !comment;
  }

  function newConversation() {
    setConversation(null);
    forgetQuery();
    $("thread").replaceChildren();
    $("thread-section").hidden = true;
    showError("");
    setStatus("The next question starts a new conversation.");
    $("question").value = "";
    $("question").focus();
  }

  // The filters every search of this question applied (the record keeps them with absolute times).
  function renderFilters(filters) {
    const parts = [];
    if (filters && filters.source) parts.push(`source ${filters.source}`);
    if (filters && filters.since) parts.push(`since ${filters.since.slice(0, 10)}`);
    if (filters && filters.until) parts.push(`until ${filters.until.slice(0, 10)}`);
    if (filters && filters.kind) parts.push(`kind ${filters.kind}`);
    for (const [key, value] of Object.entries((filters && filters.where) || {})) parts.push(`${key}=${value}`);
    $("filters").hidden = !parts.length;
    $("filters").textContent = parts.length ? `Searched only documents with: ${parts.join(", ")}` : "";
  }

  // The time the question's words named ("latest", "last week"), read as dates, and each widening
  // the retriever made when that range held nothing on the question's topic.
  function renderTimeRead(time) {
    const box = $("time-read");
    box.hidden = !(time && time.phrase);
    if (box.hidden) { box.textContent = ""; return; }
    const range = time.since && time.until ? `from ${time.since.slice(0, 10)} to before ${time.until.slice(0, 10)}`
      : time.since ? `since ${time.since.slice(0, 10)}` : time.until ? `before ${time.until.slice(0, 10)}` : "at any time";
    const widened = (time.widened || []).length ? `; nothing on its topic there, widened: ${time.widened.join(" → ")}` : "";
    box.textContent = `Read “${time.phrase}” in the question as published ${range}${widened}.`;
  }

  // Every step the model did not do (a transient failure, an unusable reply, a spent budget).
  function renderFallbacks(fallbacks) {
    $("fallbacks").hidden = !fallbacks.length;
    $("fallbacks").replaceChildren(...fallbacks.map((f) =>
      el("li", { class: "fallback" }, `Without the model: ${f.stage}, iteration ${f.iteration + 1} (${f.reason})`)));
  }

  // The same waterfall as `ragbus trace`: every stage of every iteration, timed.
  async function loadTrace(id) {
    // spans are exported in batches: ask again shortly if the last ones are not in yet
    for (const delay of [300, 1200]) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      if (id !== currentId) return;
      const response = await fetch(`/v1/queries/${encodeURIComponent(id)}/trace`);
      if (!response.ok) continue;
      const body = await response.json();
      if (body.rows.length) renderTrace(body);
      else if (body.console_url) renderTraceLink(body);
      // a thread's "stages and trace" link opens the page at the trace, which is drawn only now
      if (window.location.hash === "#trace-section" && !$("trace-section").hidden) $("trace-section").scrollIntoView();
    }
  }

  // On Google Cloud the spans live in Cloud Trace: when the gateway cannot read them
  // (not there yet, no permission) it says why and where to look.
  function traceLink(body) {
    const href = safeUrl(body.console_url);
    return href ? el("a", { href, target: "_blank", rel: "noopener noreferrer" }, "open it in the Cloud console") : null;
  }

  function renderTraceLink(body) {
    $("trace-section").hidden = false;
    $("trace-summary").replaceChildren(`trace ${body.trace_id} · not readable from here yet · `, traceLink(body));
    $("trace-summary").title = body.note || "";
    $("waterfall").replaceChildren();
  }

  function renderTrace(body) {
    const total = Math.max(body.duration_ms, 0.001);
    $("trace-section").hidden = false;
    $("trace-summary").title = "";
    $("trace-summary").replaceChildren(
      `trace ${body.trace_id} · ${body.rows.length} spans · ${body.duration_ms.toFixed(1)} ms`,
      body.console_url ? " · " : "", body.console_url ? traceLink(body) : "");
    $("waterfall").replaceChildren(...body.rows.map((row) => {
      // geometry through the CSSOM: the page's Content-Security-Policy forbids style attributes
      const bar = el("span", { class: `bar${row.status === "ERROR" ? " bar-error" : ""}` });
      bar.style.marginLeft = `${(100 * row.offset_ms / total).toFixed(2)}%`;
      bar.style.width = `${Math.max(0.4, 100 * row.duration_ms / total).toFixed(2)}%`;
      const label = el("span", { class: "span-label", title: row.label }, row.label);
      label.style.paddingLeft = `${row.depth * 0.6}em`;
      return el("li", { class: "span-row", "data-name": row.name },
        label,
        el("span", { class: "span-time" }, `${row.duration_ms.toFixed(1)} ms`),
        el("span", { class: "span-track" }, bar));
    }));
  }

  function renderAnswer(text, citations) {
    const byNumber = new Map(citations.map((c) => [String(c.id), c]));
    const answer = $("answer");
    answer.replaceChildren();
    for (const paragraph of text.split(/\n{2,}/)) {
      const p = el("p");
      // "[1]" or "[1, 2]" become numbered links to the sources.
      const parts = paragraph.split(/(\[\d+(?:\s*,\s*\d+)*\])/);
      for (const part of parts) {
        const match = /^\[(.*)\]$/.exec(part);
        if (!match) { p.append(part); continue; }
        const numbers = match[1].split(",").map((n) => n.trim());
        p.append("[");
        numbers.forEach((n, i) => {
          if (i) p.append(", ");
          p.append(citeLink(n, byNumber.get(n)));
        });
        p.append("]");
      }
      answer.append(p);
    }
    const list = $("citations");
    list.replaceChildren();
    for (const c of citations) {
      const href = safeUrl(c.url);
      list.append(el("li", { id: `source-${c.id}`, value: Number.isInteger(Number(c.id)) ? c.id : null },
        href ? el("a", { href, target: "_blank", rel: "noopener noreferrer", class: "source-title" }, c.title || href)
             : el("span", { class: "source-title unlinked" }, c.title || "(untitled)"),
        href ? el("span", { class: "url" }, href) : (c.url ? el("span", { class: "url" }, c.url) : null),
        el("span", { class: "meta" }, `${c.position ? `${c.position} · ` : ""}document ${c.document_id || "?"} · ${chunkLabel(c)}`)));
    }
    // an answer that cites nothing (an abstention) has no sources to head
    $("sources-heading").hidden = citations.length === 0;
    list.hidden = citations.length === 0;
  }

  // One number per source: the chunks of one document share it (chunk_ids lists them).
  function chunkLabel(citation) {
    const chunks = (citation.chunk_ids && citation.chunk_ids.length) ? citation.chunk_ids
      : [citation.chunk_id].filter(Boolean);
    if (!chunks.length) return "chunk ?";
    return `${chunks.length === 1 ? "chunk" : "chunks"} ${chunks.join(", ")}`;
  }

  function citeLink(number, citation) {
    const href = citation ? safeUrl(citation.url) : null;
    const place = citation && citation.position ? `, ${citation.position}` : "";
    const title = citation ? `${citation.title || ""}${citation.chunk_id ? ` (${chunkLabel(citation)}${place})` : ""}` : "";
    if (href) {
      return el("a", { class: "cite", href, target: "_blank", rel: "noopener noreferrer", title, "data-cite": number }, number);
    }
    return el("a", { class: "cite", href: `#source-${number}`, title, "data-cite": number }, number);
  }

  function renderIterations(record) {
    const iterations = record.iterations || [];
    const box = $("iterations");
    // every event redraws the iterations: a list of sources the reader opened stays open (it closed under them)
    const opened = new Set([...box.querySelectorAll(".iteration details.sources[open]")]
      .map((details) => details.closest(".iteration").dataset.iteration));
    box.replaceChildren();
    $("iterations-section").hidden = iterations.length === 0;
    for (const item of iterations) {
      const kept = record.best_iteration === item.iteration && record.best_iteration !== null;
      const grade = item.grade || {};
      const section = el("section", { class: `iteration${kept ? " kept" : ""}`, "data-iteration": item.iteration },
        el("h3", null, `Iteration ${item.iteration + 1}`,
          item.decision ? el("span", { class: `badge decision-${item.decision}` }, item.decision) : null,
          kept ? el("span", { class: "badge kept" }, "kept") : null),
        el("dl", { class: "facts" },
          queryFacts(record.standalone_question || record.original_query || record.question || "", item.query,
            item.added_terms),
          (item.sub_queries || []).length ? [el("dt", null, "Sub-queries"),
            el("dd", null, el("ul", { class: "sub-queries" }, item.sub_queries.map((q) => el("li", null, q))))] : null),
        item.grade ? gradeTable(grade, item.decision, item.failed_thresholds, item.shown_scores)
          : el("p", { class: "pending" }, "Not graded yet."),
        item.timings ? el("p", { class: "timings" }, "Timings: ",
          Object.entries(item.timings).map(([stage, ms]) => `${stage} ${Math.round(ms)} ms`).join(" · ")) : null,
        contextsList(item.contexts || [], opened.has(String(item.iteration))));
      box.append(section);
    }
  }

  // The query searched, with the search terms the rewrite appended after the question shown apart:
  // "How does BM25 saturate term frequency? speed less" is the question plus two corpus words. The record
  // carries them (added_terms, shared.contract.text.query_apart); a record written before it is read by its "?".
  function queryFacts(question, query, addedTerms) {
    const text = query || "";
    const end = text.lastIndexOf("?");
    const added = typeof addedTerms === "string" ? addedTerms
      : question.trim().endsWith("?") && end >= 0 ? text.slice(end + 1).trim() : "";
    const searched = added && text.endsWith(added) ? text.slice(0, text.length - added.length).trim() : text;
    const shown = [el("dt", null, "Query"), el("dd", { class: "query" }, searched || "—")];
    return added ? [...shown, el("dt", null, "Search terms added"), el("dd", { class: "added-terms" }, added)] : shown;
  }

  function gradeTable(grade, decision, failed, scores) {
    // the decision with the rule it follows: "refine (not grounded)" under a 0.79 that passed the score
    const why = (failed || []).length ? ` (${failed.join(", ")})` : "";
    // each score as the record carries it (shared.query.grading.shown_scores), as `ragbus ask` shows it: a score
    // below its threshold with the places that tell it apart (two places read "0.60" beside "score 0.5999 < 0.6")
    const shown = (name, value) => (scores && typeof scores[name] === "string" ? scores[name] : fmt(value));
    const cells = [
      ["Score", shown("score", grade.score)],
      ["Relevance", shown("relevance", grade.relevance)],
      ["Completeness", shown("completeness", grade.completeness)],
      ["Grounded", grade.grounded === true ? "yes" : grade.grounded === false ? "no" : "—"],
      ["Decision", decision ? `${decision}${why}` : "—"],
    ];
    return el("table", { class: "grade" },
      el("caption", null, "Grade"),
      el("thead", null, el("tr", null, cells.map(([name]) => el("th", { scope: "col" }, name)))),
      el("tbody", null, el("tr", null, cells.map(([, value]) => el("td", null, value)))),
      grade.reasoning ? el("tfoot", null, el("tr", null, el("td", { colspan: 5 }, grade.reasoning))) : null);
  }

  function contextsList(contexts, open) {
    if (!contexts.length) return el("p", { class: "pending" }, "No sources retrieved yet.");
    return el("details", { class: "sources", open },
      el("summary", null, `Sources (${contexts.length})`),
      el("ol", { class: "contexts" }, contexts.map(contextItem)));
  }

  // A chunk's text as a preview, as `ragbus search` prints it: without the Title/Published/Source
  // header (the link above says where it is from) nor the title repeated, cut at a word boundary.
  const HEADER = /^Title: [^\n]*\nPublished: [^\n]*\nSource: [^\n]*(\n\n|\n?$)/;

  function snippetOf(text, title, limit = 300) {
    let body = (text || "").replace(HEADER, "").split(/\s+/).join(" ").trim();
    const heading = (title || "").split(/\s+/).join(" ").trim();
    if (heading && body.startsWith(heading + " ")) body = body.slice(heading.length + 1);
    if (body.length <= limit) return body;
    const cut = body.slice(0, limit + 1);
    const space = cut.lastIndexOf(" ");
    return (space > 0 ? cut.slice(0, space) : body.slice(0, limit)).replace(/[\s,;:\-–—]+$/, "") + "…";
  }

  // A source's score is its similarity to what was searched, as `ragbus search` and GET /v1/search show it;
  // a query's contexts also carry the fused rank score (about 1/60 whatever the match), which read
  // "score 0.03" beside every source of a grade of relevance 1.00.
  function contextItem(c) {
    const score = typeof c.index_score === "number" ? c.index_score : c.score;
    return el("li", null,
      sourceLink(c.title || c.url || c.chunk_id || "(untitled)", c.url),
      typeof score === "number" ? el("span", { class: "score" }, ` score ${fmt(score)}`) : null,
      el("p", { class: "snippet" }, snippetOf(c.text, c.title)));
  }

  // ------------------------------------------------------------ search only

  // A search replaces what the page showed: the question's answer, stages, iterations and
  // trace go (and its live stream stops), so the results are not read as that question's.
  function forgetQuery() {
    if (source) { source.close(); source = null; }
    currentId = null;
    setBusy(false);
    resetResults();
    $("progress-section").hidden = true;
    $("trace-section").hidden = true;
    $("waterfall").replaceChildren();
    const url = new URL(window.location.href);
    url.searchParams.delete("id");
    history.replaceState(null, "", url);
  }

  async function searchOnly() {
    showError("");
    const q = $("question").value.trim();
    if (!q) { showError("Type some words to search for."); $("question").focus(); return; }
    const k = $("top-k").value.trim() || "10";
    forgetQuery();
    setStatus("Searching…");
    const params = new URLSearchParams({ q, k, ...filterInputs() });
    const response = await fetch(`/v1/search?${params}`);
    if (!response.ok) { setStatus(""); showError(await readError(response)); return; }
    const body = await response.json();
    $("search-section").hidden = false;
    $("search-results").replaceChildren(...body.results.map(contextItem));
    setStatus(`${body.results.length} passages found.`);
  }

  // ------------------------------------------------------------------ start

  document.addEventListener("DOMContentLoaded", () => {
    $("ask-form").addEventListener("submit", ask);
    $("search-only").addEventListener("click", searchOnly);
    $("new-conversation").addEventListener("click", newConversation);
    $("rate-up").addEventListener("click", () => rate("up"));
    $("rate-down").addEventListener("click", () => rate("down"));
    $("feedback-form").addEventListener("submit", submitFeedback);
    $("question").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("ask-form").requestSubmit();
    });
    const params = new URL(window.location.href).searchParams;
    if (params.get("conversation")) {
      setConversation(params.get("conversation"));
      loadThread();
    }
    const id = params.get("id");
    if (id) {
      fetch(`/v1/queries/${encodeURIComponent(id)}`).then(async (response) => {
        if (response.status === 404) {
          showError("There is no question with this id here (it may have expired, or been asked on another " +
                    "ragbus). Ask it again above.");
          return;
        }
        if (!response.ok) { showError(await readError(response)); return; }
        const record = await response.json();
        $("question").value = record.original_query || "";
        if (record.conversation_id && record.conversation_id !== conversationId) {
          setConversation(record.conversation_id);
          loadThread();
        }
        follow(id);
      });
    }
  });
})();
