// Polls the JSON run list every 2 s; redraws a view (server-rendered HTML) only when its stamp changed.
"use strict";
const base = document.body.dataset.base;
const POLL_MS = 2000;
let runsKey = null;
let runStamp = null;
let selected = null;
let diffChoice = null;

async function get(path, json) {
  const response = await fetch(base + path, { credentials: "same-origin" });
  if (response.status === 401) {
    location.reload(); // the page asks for the token again
    throw new Error("token required");
  }
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return json ? response.json() : response.text();
}

function runFromHash() {
  const match = location.hash.match(/run=([\w.-]+)/);
  return match ? match[1] : null;
}

async function showDiff() {
  if (!diffChoice || !selected) return;
  const query = `?a=${encodeURIComponent(diffChoice.a)}&b=${encodeURIComponent(diffChoice.b)}`;
  const target = document.getElementById("diff");
  if (target) target.innerHTML = await get(`fragments/runs/${encodeURIComponent(selected)}/diff${query}`, false);
}

async function showRun() {
  const detail = document.getElementById("detail");
  detail.innerHTML = await get(`fragments/runs/${encodeURIComponent(selected)}`, false);
  runStamp = detail.querySelector("#run-detail").dataset.stamp;
  const form = document.getElementById("diff-form");
  if (form && diffChoice) {
    form.a.value = diffChoice.a;
    form.b.value = diffChoice.b;
    await showDiff();
  }
}

async function refresh() {
  const data = await get("api/runs", true);
  const key = JSON.stringify([selected, data.runs.map((r) => [r.id, r.stamp])]);
  if (key !== runsKey) {
    const query = selected ? `?selected=${encodeURIComponent(selected)}` : "";
    document.getElementById("runs").innerHTML = await get(`fragments/runs${query}`, false);
    runsKey = key;
  }
  const run = data.runs.find((r) => r.id === selected);
  if (run && run.stamp !== runStamp) await showRun();
  // UTC, as every other time the page, the CLI and the report show.
  const now = new Date().toISOString().slice(11, 19);
  document.getElementById("live").textContent = `updated ${now} UTC`;
}

async function poll() {
  try {
    await refresh();
  } catch (err) {
    document.getElementById("live").textContent = `not updating: ${err.message}`;
  }
  setTimeout(poll, POLL_MS);
}

function select(runId) {
  selected = runId;
  runStamp = null;
  diffChoice = null;
  refresh().catch((err) => {
    document.getElementById("live").textContent = `not updating: ${err.message}`;
  });
}

document.getElementById("runs").addEventListener("click", (event) => {
  const row = event.target.closest("[data-run]");
  if (!row) return;
  event.preventDefault();
  location.hash = `run=${row.dataset.run}`;
});
window.addEventListener("hashchange", () => select(runFromHash()));
document.getElementById("detail").addEventListener("submit", (event) => {
  if (event.target.id !== "diff-form") return;
  event.preventDefault();
  diffChoice = { a: event.target.a.value, b: event.target.b.value };
  showDiff().catch((err) => {
    document.getElementById("diff").textContent = err.message;
  });
});

selected = runFromHash();
poll();
