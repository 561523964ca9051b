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
      return shown(i.modification, "(none)");
    })), test: function (item, v) { return shown(item.modification, "(none)") === v; } },
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
  search.placeholder = "search item, question, answer";
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
    return [item.item_id, item.question, item.answer, item.answer_raw, item.model]
      .some(function (t) { return t && String(t).toLowerCase().indexOf(needle) >= 0; });
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
    if (!item.cot && !data.requests && !item.error) {
      box.appendChild(el("p", "meta", "The CoT is not in the result lines: pass --requests " +
        "to show it."));
    }
    return box;
  }

  function detailOf(item) {
    var box = el("div", "detail");
    if (item.error) {
      var card = el("div", "error-card");
      card.appendChild(el("strong", null, "Input error at line " + shown(item.line, "?") +
        " (" + item.error.stage + ")"));
      card.appendChild(el("p", "error-detail", item.error.detail));
      box.appendChild(card);
    }
    var facts = el("dl", "facts");
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
    box.appendChild(facts);
    if (!item.error) {
      var graded = el("div", "metrics");
      metrics.forEach(function (spec) {
        graded.appendChild(metricBlock(spec, item.metrics[spec.label]));
      });
      box.appendChild(graded);
    }
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
      shown(item.model, "(no model)"), shown(item.modification, "(none)"), item.answer,
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

  function render() {
    var column = columns.filter(function (c) { return c.key === state.key; })[0];
    var order = items.map(function (item, index) { return index; }).filter(function (index) {
      return matches(items[index]);
    });
    order.sort(function (a, b) {
      return state.dir * compare(column.value(items[a]), column.value(items[b])) || a - b;
    });
    columns.forEach(function (c) {
      c.th.setAttribute("aria-sort", c === column ?
        (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    while (body.firstChild) {
      body.removeChild(body.firstChild);
    }
    order.forEach(function (index) {
      body.appendChild(rowOf(items[index], index));
      if (state.open[index]) {
        var tr = el("tr", "item-detail");
        var td = el("td");
        td.colSpan = columns.length;
        td.appendChild(detailOf(items[index]));
        tr.appendChild(td);
        body.appendChild(tr);
      }
    });
    count.textContent = order.length + " of " + items.length + " listed items shown" +
      (data.total > items.length ? " (" + data.total + " in the run)" : "");
  }

  render();
})();
