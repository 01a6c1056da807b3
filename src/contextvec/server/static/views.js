/* contextvec explorer: the three views (word across contexts, nearest contexts, reports). */
"use strict";

(() => {
  const { $, el, api, showMessage, perModel, heatmap, chart, table, marked, state } = Explorer;
  const fmt = (x) => x.toFixed(3);
  const fmtMargin = (x) => (Math.round(x * 1000) / 1000 + 0).toFixed(3);  // a rounding error: 0.000, not -0.000
  let shown = new Set();

  /* -- A word across contexts ---------------------------------------------------------------- */

  /* A line's sense mark, "[river] We sat on the bank .": [sense, sentence] (sense null: none). */
  function senseMark(line) {
    const found = /^\[([^[\]\s]+)\]\s+(.*)$/.exec(line.trim());
    return found ? [found[1], found[2]] : [null, line.trim()];
  }

  async function across() {
    const lines = $("across-sentences").value.split("\n").filter((s) => s.trim()).map(senseMark);
    const sentences = lines.map(([, s]) => s);
    const marks = lines.map(([m]) => m);
    const word = $("across-word").value.trim();
    if (!sentences.length || !word) {
      showMessage("Type at least two sentences and the word to compare.");
      return;
    }
    if (/\s/.test(word)) {
      showMessage(`"${word}" is more than one word: give one word (a token of the sentences).`);
      return;
    }
    const markedCount = marks.filter((m) => m !== null).length;
    if (markedCount && markedCount < marks.length) {
      showMessage("Mark the sense of every sentence ([river] We sat on the bank .) or of none.");
      return;
    }
    const senses = markedCount ? marks : null;
    const target = $("across-results");
    const columns = await perModel(target, (model) => api("v1/explore/similarity", {
      sentences, word, senses, model: model.id, ignore_case: $("across-case").checked }));
    const values = columns.flatMap(([, r]) => r.layers.flatMap((l) => l.matrix.flat()));
    const low = values.length ? Math.min(...values) : 0;
    for (const [column, result] of columns) renderAcross(column, result, low);
    const few = columns.find(([, r]) => !r.layers.length);
    if (few) {
      const n = few[1].total;
      showMessage(`"${word}" occurs ${n === 0 ? "in none" : n === 1 ? "once" : `${n} times`} of ` +
                  "these sentences: give at least two occurrences to compare.");
    }
  }

  function renderAcross(column, result, low) {
    const labels = result.occurrences.map((o, i) => (o.sense === null ? `#${i + 1}` : `#${i + 1} ${o.sense}`));
    if (result.summary !== null) column.append(el("p", { class: "summary", text: result.summary }));
    const occurrences = table(
      result.total > result.occurrences.length
        ? `Occurrences: the first ${result.occurrences.length} of ${result.total}` : "Occurrences",
      ["#", "sentence"], result.occurrences.map((o, i) => [labels[i], marked(o.tokens, o.position)]),
      { class: "occurrences" });
    if (!result.layers.length) {
      column.append(occurrences);
      return;
    }
    column.append(el("p", { class: "scale", text: `One colour scale for every layer: ${fmt(low)} (light) to 1 (dark).` }));
    const grid = el("div", { class: "heatmaps" });
    column.append(grid);
    for (const layer of result.layers) {
      const box = el("figure", { class: "heatmap" });
      const canvas = el("div", { class: "chart", role: "img",
                                 "aria-label": `similarity of the occurrences in layer ${layer.name}` });
      box.append(canvas);
      const numbers = el("details", {}, el("summary", { text: `numbers, ${layer.name}` }),
        table(`Cosine similarity, layer ${layer.name}`, ["", ...labels],
              layer.matrix.map((row, i) => [labels[i], ...row.map(fmt)]),
              { class: "matrix", "data-layer": String(layer.layer) }));
      box.append(numbers);
      grid.append(box);
      heatmap(canvas, layer.name, labels, layer.matrix, low);
    }
    const pair = (p) => `${labels[p.first]} – ${labels[p.second]}: ${fmt(p.similarity)}`;
    const pairs = table("Closest and farthest pair per layer", ["layer", "closest", "farthest"],
      result.layers.map((l) => [l.name, pair(l.closest), pair(l.farthest)]), { class: "pairs" });
    const tables = el("div", { class: "tables" }, occurrences, pairs);
    if (result.separation !== null) {
      const layers = result.separation.layers;
      tables.append(el("div", {},
        table("Mean cosine: same sense, different senses", ["layer", "same", "different", "margin"],
              layers.map((l) => [l.name, fmt(l.same), fmt(l.different), fmtMargin(l.margin)]), { class: "separation" }),
        el("ul", { class: "verdicts" }, ...layers.map((l) => el("li", { text: `${l.name}: ${l.verdict}` })))));
    }
    column.append(tables);
  }

  /* -- Nearest contexts ---------------------------------------------------------------------- */

  let chosen = null;      // the picked token's index
  let chosenWord = null;  // and the token, kept when the sentence is edited

  function tokens() {
    return $("nearest-sentence").value.split(/\s+/).filter((t) => t);
  }

  function renderTokens(focus = false) {
    const words = tokens();
    const want = chosenWord ?? $("across-word").value.trim();
    if (chosen === null || words[chosen] !== want) {
      const again = words.indexOf(want);
      chosen = again >= 0 ? again : (words.length ? 0 : null);
    }
    chosenWord = chosen === null ? null : words[chosen];
    const box = $("nearest-tokens");
    box.replaceChildren(el("span", { class: "label", text: "Word:" }));
    words.forEach((w, i) => {
      const b = el("button", { type: "button", "aria-pressed": String(i === chosen), text: w });
      b.addEventListener("click", () => { chosen = i; chosenWord = w; renderTokens(true); nearest(); });
      box.append(b);
      if (focus && i === chosen) b.focus();
    });
  }

  async function nearest() {
    const sentence = tokens();
    if (!sentence.length || chosen === null) {
      showMessage("Type a sentence, then pick one of its words.");
      return;
    }
    const k = Number($("nearest-k").value);
    if (!Number.isInteger(k) || k < 1 || k > 50) {
      showMessage("Contexts per layer: a whole number from 1 to 50.");
      return;
    }
    const columns = await perModel($("nearest-results"), (model) => api("v1/explore/nearest", {
      sentence, position: chosen, top_k: k, model: model.id, ignore_case: $("nearest-case").checked }));
    for (const [column, result] of columns) {
      if (!result.layers.length) {
        showMessage(`"${result.word}" does not occur in the corpus (but in your sentence, if it is there): ` +
                    "pick another word.");
        continue;
      }
      column.append(el("p", { text: `"${result.word}" occurs ${result.occurrences} times in the corpus.` }));
      const grid = el("div", { class: "layer-tables" });
      column.append(grid);
      for (const layer of result.layers) {
        grid.append(table(`Layer ${layer.name}: nearest contexts`, ["#", "similarity", "sentence"],
          layer.contexts.map((c, i) => [String(i + 1), fmt(c.similarity), marked(c.tokens, c.position)]),
          { class: "nearest", "data-layer": String(layer.layer) }));
      }
    }
  }

  /* -- Mix weights and probe results --------------------------------------------------------- */

  function renderReport() {
    const target = $("report-results");
    target.replaceChildren();
    const report = state.info.reports[Number($("report-select").value)];
    if (!report) return;
    target.append(el("h2", { text: `${report.title} (${report.kind})` }),
                  el("p", { class: "hint", text: report.source }));
    const grid = el("div", { class: "report-grid" });
    target.append(grid);
    if (report.mixes.length) {
      const layers = report.mixes[0].weights.map((_, k) => `layer ${k}`);
      const part = el("div");
      const box = el("div", { class: "chart wide", role: "img", "aria-label": "softmax-normalised layer weights" });
      part.append(box);
      grid.append(part);
      chart(box, {
        title: { text: "Softmax-normalised layer weights", textStyle: { fontSize: 13 } },
        tooltip: { trigger: "axis" }, legend: { bottom: 0, type: "scroll" },
        grid: { left: 48, right: 16, top: 36, bottom: 48 },
        xAxis: { type: "category", data: layers }, yAxis: { type: "value", min: 0, max: 1 },
        series: report.mixes.map((m) => ({ type: "bar", name: `${m.name} (γ ${m.gamma.toFixed(2)})`,
                                             data: m.weights })),
      });
      part.append(table("Layer weights and gamma", ["mix", ...layers, "gamma"],
        report.mixes.map((m) => [m.name, ...m.weights.map(fmt), fmt(m.gamma)]), { class: "mixes" }));
    }
    if (report.scores.length) {
      const names = report.scores.map((s) => s.name);
      const part = el("div");
      const box = el("div", { class: "chart wide", role: "img", "aria-label": `${report.metric} per layer` });
      part.append(box);
      grid.append(part);
      const lines = Object.entries(report.baselines).map(([name, v]) => ({ name, yAxis: v }));
      const series = [{ type: "bar", name: "dev", data: report.scores.map((s) => s.dev),
                        markLine: { symbol: "none", data: lines,
                                    label: { formatter: "{b}", position: "insideStartTop" } } }];
      const tested = report.scores.some((s) => s.test !== null);
      if (tested) {
        series.push({ type: "bar", name: "test", data: report.scores.map((s) => s.test) });
      }
      chart(box, {
        title: { text: `${report.metric} per layer`, textStyle: { fontSize: 13 } },
        tooltip: { trigger: "axis" }, legend: { bottom: 0 },
        grid: { left: 48, right: 16, top: 36, bottom: 48 },
        xAxis: { type: "category", data: names }, yAxis: { type: "value", min: 0, max: 1 }, series,
      });
      part.append(table(`${report.metric} per layer`, ["probe", "dev", ...(tested ? ["test"] : [])],
        report.scores.map((s) => [s.name, fmt(s.dev), ...(tested ? [s.test === null ? "–" : fmt(s.test)] : [])]),
        { class: "scores" }));
    }
    if (!report.mixes.length && !report.scores.length) {
      target.append(el("p", { text: "This run has no learned mix and no scores per layer." }));
    }
  }

  function setUpReports() {
    const reports = state.info.reports;
    const select = $("report-select");
    const name = (path) => path.split(/[\\/]/).filter((p) => p).pop() || path;
    select.replaceChildren(...reports.map((r, i) => el("option", { value: String(i), text: `${r.title} — ${name(r.source)}` })));
    select.disabled = !reports.length;
    $("reports-hint").textContent = reports.length ? "" :
      "No report loaded: start contextvec serve with --explore-report PATH (a saved task model " +
      "directory, or a train-task, probe pos, probe wsd or experiment results file) to chart its " +
      "learned layer weights and scores per layer.";
    renderReport();
  }

  /* -- Set-up -------------------------------------------------------------------------------- */

  function onSubmit(id, fn) {
    $(id).addEventListener("submit", (event) => { event.preventDefault(); fn(); });
  }

  function setUp() {
    onSubmit("across-form", across);
    onSubmit("nearest-form", nearest);
    $("nearest-sentence").addEventListener("input", () => renderTokens());
    $("report-select").addEventListener("change", renderReport);
    $("side-by-side").addEventListener("change", () => {
      shown = new Set();
      onShow(document.querySelector('[aria-selected="true"]').id);
    });
    const corpus = state.info.corpus;
    $("corpus").textContent = `Searching ${corpus.source}: ${corpus.sentences} sentences, ` +
      `${corpus.tokens} tokens. Pick a word; its nearest occurrences in the corpus, layer by layer.`;
  }

  /* A view's first showing computes its example, so there is something to see at once. */
  function onShow(tab) {
    if (shown.has(tab)) return;
    shown.add(tab);
    if (tab === "tab-across") across();
    if (tab === "tab-nearest") { renderTokens(); nearest(); }
    if (tab === "tab-reports") setUpReports();
  }

  document.addEventListener("DOMContentLoaded", () => Explorer.start({ setUp, onShow }));
})();
