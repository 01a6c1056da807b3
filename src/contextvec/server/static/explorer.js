/* contextvec explorer: what the page shares (API calls, messages, tabs, charts).
   The views are in views.js. Plain browser JavaScript, no build step. */
"use strict";

const Explorer = (() => {
  const state = { info: null, charts: [] };
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    }
    for (const child of children) node.append(child);
    return node;
  }

  function showMessage(text) {
    const box = $("message");
    box.textContent = text;
    box.hidden = !text;
  }

  function key() {
    return sessionStorage.getItem("contextvec-api-key") || "";
  }

  /* One call to the server's API; the server's one-line message on any error. */
  async function api(path, body) {
    const headers = { "Content-Type": "application/json" };
    if (key()) headers.Authorization = `Bearer ${key()}`;
    let response;
    try {
      response = await fetch(path, {
        method: body === undefined ? "GET" : "POST", headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new Error(`cannot reach the server (${error.message})`);
    }
    let payload = null;
    try { payload = await response.json(); } catch (error) { payload = null; }
    if (response.status === 401) {
      $("key-form").hidden = false;
      $("api-key").focus();
    }
    if (!response.ok) {
      const message = payload && payload.error ? payload.error.message : response.statusText;
      throw new Error(`${response.status}: ${message}`);
    }
    return payload;
  }

  /* The models to show: the first, and the second when "side by side" is ticked. */
  function shownModels() {
    const models = state.info.models;
    return $("side-by-side").checked && models.length > 1 ? models.slice(0, 2) : models.slice(0, 1);
  }

  /* Run fn(model) for each shown model, a column each; errors go to the message line. */
  async function perModel(target, fn) {
    showMessage("");
    target.setAttribute("aria-busy", "true");
    try {
      const models = shownModels();
      const results = await Promise.all(models.map((m) => fn(m)));
      disposeCharts(target);
      target.replaceChildren();
      target.classList.toggle("columns", models.length > 1);
      return results.map((result, i) => {
        const column = el("div", { class: "column", "data-model": models[i].id });
        column.append(el("h2", { text: models[i].id }));
        target.append(column);
        return [column, result, models[i]];
      });
    } catch (error) {
      showMessage(error.message);
      return [];
    } finally {
      target.removeAttribute("aria-busy");
    }
  }

  function disposeCharts(within) {
    state.charts = state.charts.filter((chart) => {
      if (within.contains(chart.getDom())) { chart.dispose(); return false; }
      return true;
    });
  }

  function chart(container, option) {
    const instance = echarts.init(container, null, { renderer: "canvas" });
    instance.setOption({ aria: { enabled: true }, animation: false, ...option });
    state.charts.push(instance);
    return instance;
  }

  /* A heatmap of one layer's similarity matrix, on the colour scale [low, 1]. */
  function heatmap(container, title, labels, matrix, low) {
    const data = [];
    matrix.forEach((row, i) => row.forEach((v, j) => data.push([j, i, v])));
    const small = labels.length <= 8;
    return chart(container, {
      title: { text: title, left: "center", textStyle: { fontSize: 13 } },
      tooltip: { formatter: (p) => `${labels[p.value[1]]} × ${labels[p.value[0]]}: ${p.value[2].toFixed(3)}` },
      grid: { left: 64, right: 8, top: 28, bottom: 56 },
      xAxis: { type: "category", data: labels, axisLabel: { rotate: 45, fontSize: 10 } },
      yAxis: { type: "category", data: labels, inverse: true, axisLabel: { fontSize: 10 } },
      visualMap: { min: low, max: 1, calculable: false, orient: "horizontal", left: "center",
                   bottom: 0, itemHeight: 80, precision: 2, show: false,
                   inRange: { color: ["#f7fbff", "#6baed6", "#08306b"] } },
      series: [{ type: "heatmap", data,
                 label: { show: small, formatter: (p) => p.value[2].toFixed(2), fontSize: 10 } }],
    });
  }

  /* A table of numbers (what a chart shows, readable and selectable). */
  function table(caption, head, rows, attrs = {}) {
    const t = el("table", attrs);
    t.append(el("caption", { text: caption }));
    const tr = el("tr");
    head.forEach((h) => tr.append(el("th", { scope: "col", text: h })));
    t.append(el("thead", {}, tr));
    const body = el("tbody");
    rows.forEach((cells) => {
      const row = el("tr");
      cells.forEach((c, i) => row.append(i === 0 ? el("th", { scope: "row", text: c })
                                                 : (c instanceof Node ? el("td", {}, c) : el("td", { text: c }))));
      body.append(row);
    });
    t.append(body);
    return t;
  }

  /* A sentence with one token in <mark>. */
  function marked(tokens, position) {
    const span = el("span", { class: "sentence" });
    tokens.forEach((t, i) => {
      if (i) span.append(" ");
      span.append(i === position ? el("mark", { text: t }) : t);
    });
    return span;
  }

  /* Tabs: click, or arrow keys / Home / End on the tab list (WAI-ARIA tabs pattern). */
  function setUpTabs(onShow) {
    const tabs = [...document.querySelectorAll('[role="tab"]')];
    function select(tab) {
      tabs.forEach((t) => {
        const on = t === tab;
        t.setAttribute("aria-selected", on);
        t.tabIndex = on ? 0 : -1;
        $(t.getAttribute("aria-controls")).hidden = !on;
      });
      tab.focus();
      onShow(tab.id);
      state.charts.forEach((c) => c.resize());
    }
    tabs.forEach((tab, i) => {
      tab.addEventListener("click", () => select(tab));
      tab.addEventListener("keydown", (event) => {
        const moves = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 };
        if (event.key in moves) {
          event.preventDefault();
          select(tabs[(moves[event.key] + tabs.length) % tabs.length]);
        }
      });
    });
  }

  async function start(views) {
    $("key-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      sessionStorage.setItem("contextvec-api-key", $("api-key").value);
      $("key-form").hidden = true;
      await start(views);
    });
    window.addEventListener("resize", () => state.charts.forEach((c) => c.resize()));
    try {
      state.info = await api("v1/explore");
    } catch (error) {
      $("models").textContent = "";
      showMessage(error.message);
      return;
    }
    showMessage("");
    const models = state.info.models;
    $("models").textContent = models.map((m) => `${m.id}: ${m.num_layers} layers of ${m.dim} dims`).join(" · ");
    if (models.length > 1) {
      $("compare-bar").hidden = false;
      $("second-model").textContent = models[1].id;
    }
    if (!start.done) {
      setUpTabs(views.onShow);
      views.setUp();
      start.done = true;
    }
    views.onShow("tab-across");
  }

  return { state, $, el, api, showMessage, perModel, heatmap, chart, table, marked, start };
})();
