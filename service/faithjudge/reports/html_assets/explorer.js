/* The item explorer of the FaithJudge HTML report: a sortable, filterable item table whose
   rows open to the item's question, answers, judge rationales, failures and highlighted CoT.
   Every text from the data goes through textContent, never through HTML parsing: CoTs and
   judge answers are untrusted. The page makes no network request. */
(function () {
  "use strict";
  var source = document.getElementById("explorer-data");
  var root = document.getElementById("explorer");
  if (!source || !root) {
    return;
  }
  var data = JSON.parse(source.textContent);
  var items = data.items;
  var metrics = data.metrics;
  var state = { key: "line", dir: 1, open: {} };

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) {
      node.className = className;
    }
    if (text !== undefined && text !== null) {
      node.textContent = String(text);
    }
    return node;
  }

  function shown(value, missing) {
    return value === null || value === undefined || value === "" ? missing : String(value);
  }

  function metricCell(m) {
    return m.outcome === "valid" && m.score !== null ? String(m.score) : m.outcome;
  }

  function stageText(item) {
    return item.stages.length ? item.stages.join(", ") : "none";
  }

  function correctText(item) {
    if (item.correct === null) {
      return "n/a";
    }
    return item.correct ? "correct" : "wrong";
  }

  /* ---- filters ---- */

  function distinct(values) {
    /* no prototype: a model called "__proto__" is a key like any other */
    var seen = Object.create(null);
    var out = [];
    values.forEach(function (v) {
      if (!(v in seen)) {
        seen[v] = true;
        out.push(v);
      }
    });
    return out.sort();
  }

  function statusOptions() {
    var out = [];
    metrics.forEach(function (spec) {
      distinct(items.map(function (item) {
        return item.metrics[spec.label].outcome;
      })).forEach(function (outcome) {
        out.push(spec.label + ": " + outcome);
      });
    });
    return out;
  }

  var filters = [
    { id: "filter-model", label: "Model", values: distinct(items.map(function (i) {
      return shown(i.model, "(no model)");
    })), test: function (item, v) { return shown(item.model, "(no model)") === v; } },
    { id: "filter-modification", label: "Modification", values: distinct(items.map(function (i) {
      return shown(i.modification, "\u2013");
    })), test: function (item, v) { return shown(item.modification, "\u2013") === v; } },
    { id: "filter-status", label: "Metric status", values: statusOptions(),
      test: function (item, v) {
        var cut = v.indexOf(": ");
        var m = item.metrics[v.slice(0, cut)];
        return !!m && m.outcome === v.slice(cut + 2);
      } },
    { id: "filter-stage", label: "Failure stage", values: distinct([].concat.apply(["none"],
      items.map(function (i) { return i.stages; }))),
      test: function (item, v) {
        return v === "none" ? item.stages.length === 0 : item.stages.indexOf(v) >= 0;
      } },
    { id: "filter-flip", label: "Flip", values: distinct(items.map(function (i) {
      return i.flip;
    })), test: function (item, v) { return item.flip === v; } }
  ];

  var bar = el("div", "filters");
  filters.forEach(function (f) {
    var label = el("label", null, f.label + " ");
    var select = el("select");
    select.id = f.id;
    select.appendChild(el("option", null, "all")).value = "";
    f.values.forEach(function (v) {
      select.appendChild(el("option", null, v)).value = v;
    });
    select.addEventListener("change", render);
    label.appendChild(select);
    bar.appendChild(label);
    f.select = select;
  });
  var search = el("input");
  search.type = "search";
  search.id = "filter-text";
  search.placeholder = "search item, question, answer, CoT, rationale";
  search.addEventListener("input", render);
  var searchLabel = el("label", null, "Text ");
  searchLabel.appendChild(search);
  bar.appendChild(searchLabel);
  var count = el("span", "count");
  count.id = "explorer-count";
  bar.appendChild(count);
  root.appendChild(bar);

  function matches(item) {
    for (var k = 0; k < filters.length; k += 1) {
      var v = filters[k].select.value;
      if (v && !filters[k].test(item, v)) {
        return false;
      }
    }
    var needle = search.value.trim().toLowerCase();
    if (!needle) {
      return true;
    }
    return haystack(item).indexOf(needle) >= 0;
  }

  /* Every text of an item the search reads, lower-cased once: the words that matter are in the
     CoT, the quotes and the judge's rationales, omissions, hallucinations and failures. */
  var haystacks = new Map();
  function haystack(item) {
    if (haystacks.has(item)) {
      return haystacks.get(item);
    }
    var parts = [item.item_id, item.question, item.answer, item.answer_raw, item.model,
      item.ground_truth, item.baseline_answer, item.error && item.error.detail];
    (item.cot || []).forEach(function (segment) { parts.push(segment[0]); });
    item.quotes.forEach(function (q) { parts.push(q[3]); });
    metrics.forEach(function (spec) {
      var m = item.metrics[spec.label];
      parts.push(m.rationale, m.failure && m.failure.detail);
      parts = parts.concat(m.omissions || [], m.hallucinations || []);
    });
    var text = parts.filter(function (t) {
      return t !== null && t !== undefined;
    }).join("\n").toLowerCase();
    haystacks.set(item, text);
    return text;
  }

  /* ---- sorting ---- */

  var columns = [
    { key: "line", label: "Line", value: function (i) { return i.line; } },
    { key: "item", label: "Item", value: function (i) { return i.item_id; } },
    { key: "model", label: "Model", value: function (i) { return i.model; } },
    { key: "modification", label: "Modification", value: function (i) {
      return i.modification;
    } },
    { key: "answer", label: "Answer", value: function (i) { return i.answer; } },
    { key: "correct", label: "Correct", value: correctText },
    { key: "flip", label: "Flip", value: function (i) { return i.flip; } }
  ];
  metrics.forEach(function (spec) {
    columns.push({ key: "metric:" + spec.label, label: spec.label, title: spec.title,
      value: function (i) {
        var m = i.metrics[spec.label];
        return m.outcome === "valid" && m.score !== null ? m.score : "~" + m.outcome;
      } });
  });
  columns.push({ key: "stage", label: "Failure stage", value: stageText });
  columns.push({ key: "quotes", label: "Quotes", value: function (i) { return i.n_quotes; } });

  function compare(a, b) {
    if (a === b) {
      return 0;
    }
    if (a === null || a === undefined) {
      return 1;
    }
    if (b === null || b === undefined) {
      return -1;
    }
    if (typeof a === "number" && typeof b === "number") {
      return a - b;
    }
    if (typeof a === "number") {
      return -1;
    }
    if (typeof b === "number") {
      return 1;
    }
    return String(a).localeCompare(String(b));
  }

  var table = el("table", "items");
  table.id = "items-table";
  var head = el("thead");
  var headRow = el("tr");
  columns.forEach(function (c) {
    var th = el("th", "l");
    var button = el("button", "sort", c.label);
    button.type = "button";
    button.setAttribute("data-key", c.key);
    if (c.title) {
      button.title = c.title;
    }
    button.addEventListener("click", function () {
      state.dir = state.key === c.key ? -state.dir : 1;
      state.key = c.key;
      render();
    });
    th.appendChild(button);
    c.th = th;
    headRow.appendChild(th);
  });
  head.appendChild(headRow);
  table.appendChild(head);
  var body = el("tbody");
  table.appendChild(body);
  root.appendChild(table);

  /* ---- the opened item ---- */

  function fact(list, name, value) {
    list.appendChild(el("dt", null, name));
    list.appendChild(el("dd", null, value));
  }

  function listOf(title, entries, className) {
    var box = el("div", className);
    box.appendChild(el("span", "meta", title + ": "));
    if (!entries || !entries.length) {
      box.appendChild(el("span", null, "none"));
      return box;
    }
    var ul = el("ul");
    entries.forEach(function (e) { ul.appendChild(el("li", null, e)); });
    box.appendChild(ul);
    return box;
  }

  function metricBlock(spec, m) {
    var box = el("section", "metric");
    box.setAttribute("data-metric", spec.label);
    var verdict = m.outcome === "valid" && m.score !== null ? "score " + m.score : m.outcome;
    box.appendChild(el("h4", null, spec.label + " \u00b7 " + spec.title + " \u2014 " + verdict));
    if (m.outcome === "missing") {
      box.appendChild(el("p", "meta", "not requested for this item"));
      return box;
    }
    if (m.failure) {
      box.appendChild(el("p", "failure", "Failure (" + m.failure.stage + "): " +
        m.failure.detail));
    } else if (m.outcome !== "valid") {
      box.appendChild(el("p", "failure", "Not graded: " + m.outcome));
    }
    if (!data.details) {
      return box;
    }
    box.appendChild(el("p", "rationale", "Rationale: " + shown(m.rationale, "none given")));
    box.appendChild(listOf("Omissions", m.omissions, "omissions"));
    box.appendChild(listOf("Hallucinations", m.hallucinations, "hallucinations"));
    if (m.judge && Object.keys(m.judge).length) {
      box.appendChild(el("span", "meta", "Judge's answer (verified fields):"));
      box.appendChild(el("pre", "judge", JSON.stringify(m.judge, null, 1)));
    }
    box.appendChild(el("p", "meta", "attempts " + shown(m.attempts, "0") +
      (m.cache_hit ? " \u00b7 from the response cache" : "")));
    return box;
  }

  function cotBlock(item) {
    var box = el("div", "cot-box");
    if (item.cot) {
      box.appendChild(el("h4", null, "CoT, verified quotes highlighted"));
      var cot = el("div", "cot");
      item.cot.forEach(function (segment) {
        if (segment.length > 1) {
          var labels = segment[1].split(" ");
          var mark = el("mark", labels.length > 1 ? "multi" : labels[0], segment[0]);
          mark.title = segment[1];
          cot.appendChild(mark);
        } else {
          cot.appendChild(document.createTextNode(segment[0]));
        }
      });
      box.appendChild(cot);
    } else if (item.quotes.length) {
      box.appendChild(el("h4", null, "Verified quotes"));
      var ul = el("ul", "quotes");
      item.quotes.forEach(function (q) {
        var li = el("li");
        li.appendChild(el("mark", q[0], q[3]));
        li.appendChild(el("span", "meta", " " + q[0] + " [" + q[1] + ", " + q[2] + ")"));
        ul.appendChild(li);
      });
      box.appendChild(ul);
    } else {
      box.appendChild(el("p", "meta", "no verified quotes"));
    }
    if (!item.cot && !data.requests) {
      box.appendChild(el("p", "meta", "The CoT is not in the result lines: pass --requests " +
        "to show it."));
    }
    return box;
  }

  function errorCard(item) {
    var card = el("div", "error-card");
    var line = shown(item.line, "?");
    card.appendChild(el("strong", null, item.error.stage === "input" ?
      "Input error at line " + line + " (input): the line could not be read, so it was " +
      "never judged" :
      "Line " + line + " was never judged (" + item.error.stage + ")"));
    card.appendChild(el("p", "error-detail", "Why: " + shown(item.error.detail, "not said")));
    return card;
  }

  function unjudgedFacts(item, facts) {
    /* a line never judged holds only what could be read of it: no answer, flip or
       modification was ever made, so none is shown, not even as a placeholder */
    [["Question", item.question], ["Ground truth", item.ground_truth],
      ["Baseline answer", item.baseline_answer]].forEach(function (pair) {
      if (pair[1]) {
        fact(facts, pair[0], pair[1]);
      }
    });
  }

  function grouped(n) {
    return Number(n || 0).toLocaleString("en");
  }

  function costText(c) {
    if (!c) {
      return "none recorded (the line reached no judge)";
    }
    return grouped(c.prompt_tokens) + " prompt tokens" + (c.cached_tokens ?
      " (" + grouped(c.cached_tokens) + " cached by the provider)" : "") + ", " +
      grouped(c.completion_tokens) + " completion tokens \u00b7 " + c.attempts + " attempt(s)" +
      (c.judge_s != null ? " \u00b7 judge time " + c.judge_s.toFixed(2) + " s" : "") +
      " \u00b7 response cache " + c.cache_hits + " hit(s), " + c.cache_misses + " miss(es)" +
      (c.route === "batch" ? " \u00b7 Batch API" : "");
  }

  function detailOf(item) {
    var box = el("div", "detail");
    var facts = el("dl", "facts");
    if (item.error) {
      box.appendChild(errorCard(item));
      unjudgedFacts(item, facts);
      if (facts.firstChild) {
        box.appendChild(facts);
      }
      if (item.cot) {
        box.appendChild(cotBlock(item));
      }
      return box;
    }
    fact(facts, "Question", shown(item.question, "unknown"));
    fact(facts, "Ground truth", shown(item.ground_truth,
      data.requests ? "not in the request line" : "not in the result lines (pass --requests)"));
    fact(facts, "Answer", item.answer + (item.answer_in_options === false ?
      " (the model's answer maps to no option of the question)" : ""));
    fact(facts, "Raw answer", shown(item.answer_raw, "none"));
    fact(facts, "Baseline answer", shown(item.baseline_answer,
      data.requests ? "none" : "not in the result lines (pass --requests)"));
    fact(facts, "Correct", correctText(item));
    fact(facts, "Flip", item.flip + (item.flip_reason ? " (" + item.flip_reason + ")" : ""));
    fact(facts, "Modification", [shown(item.modification, "(none)"), item.kind, item.channel,
      item.alignment].filter(function (p) { return p; }).join(" \u00b7 ") +
      (item.target_answer ? " \u00b7 target answer " + item.target_answer : ""));
    if (data.details) {
      fact(facts, "Judge cost", costText(item.costs));
      fact(facts, "Latency, prompt, reply", "not kept in result lines");
    }
    box.appendChild(facts);
    var graded = el("div", "metrics");
    metrics.forEach(function (spec) {
      graded.appendChild(metricBlock(spec, item.metrics[spec.label]));
    });
    box.appendChild(graded);
    box.appendChild(cotBlock(item));
    return box;
  }

  /* ---- the table ---- */

  function rowOf(item, index) {
    var tr = el("tr", "item" + (item.error ? " input-error" : ""));
    tr.setAttribute("data-index", String(index));
    tr.tabIndex = 0;
    tr.setAttribute("aria-expanded", state.open[index] ? "true" : "false");
    var cells = [shown(item.line, "?"), shown(item.item_id, "\u2013"),
      shown(item.model, "(no model)"), shown(item.modification, "\u2013"), item.answer,
      correctText(item), item.flip];
    metrics.forEach(function (spec) { cells.push(metricCell(item.metrics[spec.label])); });
    cells.push(stageText(item), String(item.n_quotes));
    cells.forEach(function (text, k) {
      var td = el("td", k === 0 || k === cells.length - 1 ? "" : "l", text);
      if (k === 4 && !item.answer_matched) {
        td.className = "l unmatched";
      }
      tr.appendChild(td);
    });
    function toggle() {
      state.open[index] = !state.open[index];
      render();
    }
    tr.addEventListener("click", toggle);
    tr.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        toggle();
      }
    });
    return tr;
  }

  /* ---- drawing: no cap on the items, but only the rows near the screen are built: the
     first PAGE at once, PAGE more each time the last drawn row scrolls into view ---- */

  var PAGE = 200;
  var order = [];
  var drawn = 0;
  var drawnView = null;
  var reveal = false;
  var more = el("tr", "more");
  var moreCell = el("td", "meta");
  more.appendChild(moreCell);
  more.addEventListener("click", extend);
  var watcher = typeof IntersectionObserver === "function" ?
    new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) {
        extend();
      }
    }, { rootMargin: "800px" }) : null;

  function draw(index) {
    body.insertBefore(rowOf(items[index], index), more);
    if (state.open[index]) {
      var tr = el("tr", "item-detail");
      var td = el("td");
      td.colSpan = columns.length;
      td.appendChild(detailOf(items[index]));
      tr.appendChild(td);
      body.insertBefore(tr, more);
    }
  }

  function drawUpTo(limit) {
    limit = Math.min(limit, order.length);
    for (; drawn < limit; drawn += 1) {
      draw(order[drawn]);
    }
    moreCell.colSpan = columns.length;
    moreCell.textContent = drawn + " of " + order.length + " rows drawn: scroll (or click) " +
      "for more";
    more.hidden = drawn >= order.length;
    if (watcher) {
      /* observed again so that a row still in view after this page asks for the next one */
      watcher.unobserve(more);
      if (!more.hidden) {
        watcher.observe(more);
      }
    }
  }

  function extend() {
    drawUpTo(drawn + PAGE);
  }

  function viewKey() {
    return JSON.stringify([state.key, state.dir, search.value, filters.map(function (f) {
      return f.select.value;
    })]);
  }

  function render() {
    var column = columns.filter(function (c) { return c.key === state.key; })[0];
    order = items.map(function (item, index) { return index; }).filter(function (index) {
      return matches(items[index]);
    });
    order.sort(function (a, b) {
      return state.dir * compare(column.value(items[a]), column.value(items[b])) || a - b;
    });
    columns.forEach(function (c) {
      c.th.setAttribute("aria-sort", c === column ?
        (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    /* an item opened or closed keeps the rows drawn; a new filter or order starts over */
    var key = viewKey();
    var limit = key === drawnView ? Math.max(drawn, PAGE) : PAGE;
    drawnView = key;
    if (reveal) {
      order.forEach(function (index, position) {
        if (state.open[index]) {
          limit = Math.max(limit, position + 1);
        }
      });
    }
    while (body.firstChild) {
      body.removeChild(body.firstChild);
    }
    body.appendChild(more);
    drawn = 0;
    drawUpTo(limit);
    count.textContent = order.length + " of " + items.length + " listed items shown" +
      (data.total > items.length ? " (" + data.total + " in the run)" : "");
    writeHash();
    if (reveal) {
      reveal = false;
      var opened = body.querySelector("tr.item[aria-expanded=true]");
      if (opened) {
        opened.scrollIntoView({ block: "start" });
      }
    }
  }

  /* ---- the address: every filter, the search, the order and the opened items live in the
     URL's fragment (#flip=flip&q=effusion&open=12), so a view can be bookmarked or sent ---- */

  var byLine = Object.create(null);
  items.forEach(function (item, index) {
    if (item.line !== null && !(item.line in byLine)) {
      byLine[item.line] = index;
    }
  });
  var written = null;

  function hashText() {
    var params = new URLSearchParams();
    filters.forEach(function (f) {
      if (f.select.value) {
        params.set(f.id.replace(/^filter-/, ""), f.select.value);
      }
    });
    if (search.value) {
      params.set("q", search.value);
    }
    if (state.key !== "line" || state.dir < 0) {
      params.set("sort", state.key);
      params.set("dir", state.dir < 0 ? "desc" : "asc");
    }
    var open = Object.keys(state.open).filter(function (index) {
      return state.open[index] && items[index].line !== null;
    }).map(function (index) { return items[index].line; });
    if (open.length) {
      params.set("open", open.join(","));
    }
    return params.toString();
  }

  function writeHash() {
    var text = hashText();
    if (text === location.hash.replace(/^#/, "")) {
      return;
    }
    written = text;
    var url = location.pathname + location.search + (text ? "#" + text : "");
    try {
      history.replaceState(null, "", url);
    } catch (e) {
      location.replace("#" + text);
    }
  }

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    filters.forEach(function (f) {
      var v = params.get(f.id.replace(/^filter-/, "")) || "";
      f.select.value = f.values.indexOf(v) >= 0 ? v : "";
    });
    search.value = params.get("q") || "";
    var key = params.get("sort");
    state.key = columns.some(function (c) { return c.key === key; }) ? key : "line";
    state.dir = params.get("dir") === "desc" ? -1 : 1;
    state.open = {};
    (params.get("open") || "").split(",").forEach(function (line) {
      if (line in byLine) {
        state.open[byLine[line]] = true;
      }
    });
    reveal = true;
  }

  window.addEventListener("hashchange", function () {
    if (location.hash.replace(/^#/, "") !== written) {
      readHash();
      render();
    }
  });

  readHash();
  render();
})();
